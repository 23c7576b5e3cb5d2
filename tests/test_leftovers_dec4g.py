"""Leftovers of the December 4 audits (helper B, round g): error messages that named the wrong argument, a
NaN initial model reported without its run, a bool taken as an amount of work, and raw numpy/torch errors for
a float row index. Each test fails on the code before its fix."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.quadratic import run_replicas
from fedlib.engines.stacked import RunSpec
from fedlib.experiments.custom import TensorEngine
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.schedules import FixedSteps, RandomLocalWork, whole_steps
from fedlib.solvers import sgd


# --------------------------------------------------------------------------- 1. RandomLocalWork lengths
@pytest.mark.parametrize("low, high, sizes", [([1, 1, 1], [2, 3], "3 low and 2 high"),
                                              ([1, 1], [2, 3, 4], "2 low and 3 high")])
def test_random_local_work_length_mismatch_names_low_and_high(low, high, sizes):
    """Was: 'high must have 3 entries (one per client), got 2' when low had the extra entry."""
    with pytest.raises(ValueError, match=f"^low and high must have one entry per client each, got {sizes}$"):
        RandomLocalWork(low, high)


# --------------------------------------------------------------------------- 2. run_replicas: the work's draw
class _ShortDraw:
    """A local-work schedule whose draw gives one step count for two clients."""

    def draw(self, round_index):
        return np.array([2]), np.array([0, 0])


def test_run_replicas_names_the_work_draw_when_it_gives_the_wrong_number_of_steps():
    """Was: 'steps must have 2 entries (one per client), got 1' (run_replicas has no argument steps)."""
    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"^work\.draw\(0\): steps must have 2 entries \(one per client\), got 1$"):
        run_replicas(prob, "fedavg", [sgd(0.5)], _ShortDraw(), 1)


# --------------------------------------------------------------------------- 3. stacked engines: a NaN initial model
def _engine_with(model, params):
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(0, 4), np.arange(4, 8)], FixedSteps([1, 2]), seed=0,
                  params=params)
    torch.manual_seed(0)
    return TensorEngine(model, torch.randn(8, 6, dtype=torch.float64), torch.arange(8) % 3, [run], rounds=1,
                        batch_size=2, dropout=False, dtype=torch.float64)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_stacked_engine_names_the_run_and_parameter_of_a_non_finite_initial_model(bad):
    """Was: 'params hold NaN or inf (the initial model must be finite)', without runs[r] or the parameter."""
    model = nn.Linear(6, 3).double()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    params["bias"][1] = bad
    with pytest.raises(ValueError, match=r"^runs\[0\]\.params: parameter 'bias' holds NaN or inf \(the initial model "
                                         r"must be finite\)$"):
        _engine_with(model, params)
    with torch.no_grad():
        model.weight[0, 0] = bad
    with pytest.raises(ValueError, match=r"^model: parameter 'weight' holds NaN or inf"):  # params=None: the model
        _engine_with(model, None)


# --------------------------------------------------------------------------- 4. whole_steps of a bool
@pytest.mark.parametrize("work", [True, False, np.True_, np.array(True), np.array([True, False]), [2.0, True],
                                  torch.tensor(True)])
def test_whole_steps_refuses_a_bool(work):
    """Was: whole_steps(True) == 1.0 and whole_steps([2.0, True]) == [2, 1]: a bool is no amount of work."""
    with pytest.raises(ValueError, match=r"^work must be a number of steps, not a bool, got "):
        whole_steps(work)
    assert whole_steps([2.5, 1]).tolist() == [2.0, 1.0] and whole_steps(np.int64(3)) == 3.0  # numbers still pass


# --------------------------------------------------------------------------- 5. tree_index of a float
@pytest.mark.parametrize("leaf", [np.arange(6.0).reshape(3, 2), torch.arange(6.0).reshape(3, 2)])
@pytest.mark.parametrize("index, shown", [(1.0, "1.0"), (float("nan"), "nan"), (np.float64(1.0), "1.0"),
                                          (np.array([0.0, 1.0]), r"array\(\[0\., 1\.\]\)"), (None, "None")])
def test_tree_index_refuses_a_float_index_by_name(leaf, index, shown):
    """Was: numpy's / torch's raw IndexError ('only integers, slices ... are valid indices'), and for a torch leaf
    a float index array picked rows silently; None added an axis."""
    from fedlib.tree import tree_index

    with pytest.raises(ValueError, match=rf"^i must be a row index \(an int, slice or index array\), got {shown}$"):
        tree_index({"w": leaf}, index)
    for ok in (1, np.int64(1), slice(0, 2), np.array([0, 2]), torch.tensor([0, 2]), [0, 2]):  # row indices still pass
        assert np.shape(tree_index({"w": leaf}, ok)["w"]) == np.shape(leaf[ok])

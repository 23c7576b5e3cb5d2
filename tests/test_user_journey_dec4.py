"""A user-journey audit (Dec 4): an outside researcher following README.md and the docstrings with
their own small model, data, solvers and schedules. Each test failed on the code before its fix."""
from __future__ import annotations

import pytest

from fedlib.schedules import step_decay_lr


# --------------------------------------------------------------------------- step_decay_lr
@pytest.mark.parametrize("factor", [0, -1, float("nan"), 10, True])
def test_step_decay_lr_refuses_a_factor_outside_0_1(factor):
    """step_decay_lr(0.1, 60, 100, factor=10) returned 10.0 (the rate raised tenfold by a user who read
    "divided by 10"), factor=0 a rate of 0, factor=-1 a negative rate, factor=nan a NaN rate: each was
    refused only later, by an engine's check of "lr", which does not name the factor."""
    with pytest.raises(ValueError, match=r"^factor must lie in \(0, 1\]"):
        step_decay_lr(0.1, 60, 100, factor=factor)


@pytest.mark.parametrize("milestones, where", [((1.5,), r"milestones\[0\]"), ((0.5, -1), r"milestones\[1\]"),
                                               ((float("nan"),), r"milestones\[0\]"), (0.5, "milestones"),
                                               ("0.5", "milestones")])
def test_step_decay_lr_refuses_milestones_that_are_no_fractions(milestones, where):
    """A milestone of 1.5 never decayed within the run, -1 decayed from round 1, NaN failed with numpy's
    "cannot convert float NaN to integer", and a bare 0.5 with "'float' object is not iterable"."""
    with pytest.raises(ValueError, match=rf"^{where} must be"):
        step_decay_lr(0.1, 60, 100, milestones=milestones)


def test_step_decay_lr_valid_inputs_unchanged():
    assert step_decay_lr(0.1, 60, 100) == pytest.approx(0.01, rel=1e-15)
    assert step_decay_lr(0.1, 80, 100, milestones=[0.5, 0.75], factor=1) == 0.1
    assert step_decay_lr(0.1, 1, 100, milestones=(0.0,), factor=0.5) == 0.05
    assert step_decay_lr(0.1, 99, 100, milestones=()) == 0.1

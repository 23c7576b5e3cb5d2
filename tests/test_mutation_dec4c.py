"""Mutation pass over the code written on 2026-12-04 (afternoon): tests for the mutants the
suite let through (see the commit messages for which mutant each test kills)."""
import errno
import pickle

import numpy as np
import pytest

from fedlib import checkpoint as ck


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


# --------------------------------------------------------------------------- solvers: an own step's closed forms
import dataclasses  # noqa: E402

from fedlib.solvers import LocalSolver, check_own_step  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _RampStep(LocalSolver):
    """SGD whose step ``k`` (from 0) multiplies the gradient by ``k + 1``, with the matching counter:
    x_tau = x_0 - lr * sum_k (k + 1) g_k, so a_i = [1, 2, ..., tau] and ||a_i||_1 = tau (tau + 1) / 2,
    where LocalSolver's SGD formulas would give [1] * tau and tau."""

    def update(self, state, grads):
        return super().update(state, grads * float(state.step + 1))

    def counter_step(self, k, counter):
        a, u = counter
        return (a + (k + 1.0), 1.0)


@dataclasses.dataclass(frozen=True)
class _RampStepWithItsOwnAVector(_RampStep):
    """``_RampStep`` with its own ``a_vector``, written from LocalSolver's: SGD's closed form (ones)
    times the ramp k + 1. ``super().a_vector`` must then be the built-in formula, not a probe of this
    step (which would count the ramp twice: [1, 4, 9, ...])."""

    def a_vector(self, tau):
        return super().a_vector(tau) * np.arange(1.0, tau + 1.0)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_a_subclass_with_its_own_step_gets_the_a_vector_and_a_norm_of_that_step(weight_decay):
    """Mutants: the own-step branch of a_vector / a_norm dropped (SGD's ones and tau), the probe left with
    weight decay on, its sign flipped, a_norm read after the first step. With weight decay 0.1 the
    decayed probe would give a_0 = 1 - 2 * 0.1 * lr * 1 for tau = 2, not 1."""
    solver = _RampStep(lr=0.1, weight_decay=weight_decay)
    assert not solver.builtin_step
    assert check_own_step("s", solver) is solver
    for tau in (1, 2, 5):
        np.testing.assert_allclose(solver.a_vector(tau), np.arange(1.0, tau + 1.0), rtol=1e-13)
        assert solver.a_norm(tau) == pytest.approx(tau * (tau + 1) / 2, rel=1e-13)


def test_a_subclass_that_overrides_a_vector_gets_the_built_in_formula_from_super():
    """Mutant: the own-step branch taken even where the subclass overrides a_vector (its super() call
    then probed the step instead of giving the formula)."""
    solver = _RampStepWithItsOwnAVector(lr=0.1)
    assert not solver.builtin_step
    np.testing.assert_array_equal(solver.a_vector(4), [1.0, 2.0, 3.0, 4.0])
    assert check_own_step("s", solver) is solver

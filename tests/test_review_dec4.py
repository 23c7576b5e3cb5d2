"""Findings of the fresh-eyes review of the changes of 4 December (one test per finding; the check of
unqualified cross-references it also wrote is tests/test_docstring_refs.py::test_bare_references_name_exported_names)."""
import dataclasses

import pytest

from fedlib.solvers import LocalSolver, check_builtin_step, sgd


@dataclasses.dataclass(frozen=True)
class _OwnLeafStep(LocalSolver):
    """Overrides only the leaf step: not the built-in step, though init / update / counter_step are."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        return x - 2 * lr_k * g, u


def test_builtin_step_refusal_names_the_method_the_subclass_overrides():
    """``builtin_step`` also looks at ``_direction_and_params``, but the refusal said the subclass
    overrides "init / update / counter_step", none of which it does."""
    solver = _OwnLeafStep(lr=0.1)
    assert not solver.builtin_step and sgd(0.1).builtin_step
    with pytest.raises(ValueError, match=r"overrides LocalSolver's step \(_direction_and_params\), which"):
        check_builtin_step("algorithm.solver", [solver], "the fused step does not take")

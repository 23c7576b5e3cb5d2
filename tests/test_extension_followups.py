r"""Follow-ups of the extension audit (``tests/test_extension_audit.py``): where an extension reaches a
part of fedlib that does not take it, the refusal names the argument and says which path takes it."""
import dataclasses

import numpy as np
import pytest
import torch

from fedlib.algorithms import make_algorithm
from fedlib.solvers import LocalSolver, check_own_step
from fedlib.tree import tree_map


# ---------------------------------------------------------------- 1. check_own_step's numpy probe
@dataclasses.dataclass(frozen=True)
class TorchOnlySGD(LocalSolver):
    """Plain SGD written with a tensor-only method (``Tensor.clone``): fine on torch, not on numpy."""

    name: str = "torch-only-sgd"

    def update(self, state, grads):
        x = tree_map(lambda x, g: x - self.lr * g.clone(), state.params, grads)
        counter = self.counter_step(state.step, state.shadow)
        return state._replace(params=x, step=state.step + 1, shadow=counter, a_norm=counter[0])


def test_torch_only_solver_runs_on_torch():
    """The solver itself is right on torch tensors: one step from 0 with gradient g moves by -lr g."""
    solver = TorchOnlySGD(lr=0.5)
    state = solver.update(solver.init(torch.zeros(2, dtype=torch.float64)),
                          torch.tensor([1.0, -2.0], dtype=torch.float64))
    assert state.params.tolist() == [-0.5, 1.0] and state.step == 1 and state.a_norm == 1.0


@pytest.mark.parametrize("receive", [
    lambda s: check_own_step("solver", s),
    lambda s: make_algorithm("fednova", s),
])
def test_a_torch_only_solver_is_refused_naming_it_and_the_numpy_probe(receive):
    """check_own_step probed with numpy arrays and let numpy's AttributeError ('numpy.ndarray' object has
    no attribute 'clone') through; now a ValueError names the class, the method and the probe's kind."""
    with pytest.raises(ValueError, match=r"solver: TorchOnlySGD\.update raised AttributeError.*"
                                         r"probe runs on numpy float64 vectors") as info:
        receive(TorchOnlySGD(lr=0.5))
    assert isinstance(info.value.__cause__, AttributeError)

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


# ---------------------------------------------------------------- 3. the official momentum + prox counter's excess
@pytest.mark.parametrize("tau, momentum, alpha, expected", [
    (1, 0.9, 0.1, 0.9),          # D_1 = 1 - alpha: S_1 = 2 - alpha, the true ||a||_1 is 1
    (2, 0.5, 0.25, 1.1875),      # S_2 = ((1 + 0.75 * 1) + 1.5) * 0.75 + 1 = 3.4375, true 1 + 0.75 + 0.5 = 2.25
    (2, 0.9, 0.1, 1.62),         # alpha + rho = 1: D_tau = tau rho^tau = 2 * 0.81
    (3, 0.9, 0.1, 2.187),        # 3 * 0.729
    (2, 0.5, 0.5, 0.5),          # 2 * 0.25
    (5, 0.9, 0.0, 0.0),          # one counter only (momentum): right
    (5, 0.0, 0.1, 0.0),          # one counter only (prox): right
])
def test_official_counter_excess_by_hand(tau, momentum, alpha, expected):
    from fedlib.anatomy import official_counter_excess
    assert official_counter_excess(tau, momentum, alpha) == pytest.approx(expected, rel=1e-14, abs=1e-15)


@pytest.mark.parametrize("momentum, alpha", [(0.9, 0.05), (0.9, 0.1), (0.5, 0.1), (0.9, 0.5), (0.3, 0.7), (0.5, 1.0)])
def test_official_counter_excess_is_the_counter_minus_the_true_a_norm(momentum, alpha):
    """Against the simulated official counter and fedlib's closed-form ||a_i||_1 (momentum + prox), at
    every tau up to 60, and the limit (1 - alpha - rho) / (alpha (1 - rho)) at tau = 3000."""
    from fedlib.anatomy import official_counter_a_norm, official_counter_excess, official_counter_excess_limit
    from fedlib.solvers import momentum_proximal_sgd
    solver = momentum_proximal_sgd(lr=0.1, momentum=momentum, mu=alpha / 0.1)
    for tau in range(1, 61):
        true = solver.a_norm(tau)
        assert official_counter_excess(tau, momentum, alpha) == pytest.approx(
            official_counter_a_norm(tau, momentum, alpha) - true, rel=1e-12, abs=1e-12 * true)
    limit = official_counter_excess_limit(momentum, alpha)
    assert limit == pytest.approx((1 - alpha - momentum) / (alpha * (1 - momentum)), rel=1e-15, abs=1e-15)
    assert official_counter_excess(3000, momentum, alpha) == pytest.approx(limit, abs=1e-9)


def test_official_counter_excess_limit_by_hand():
    from fedlib.anatomy import official_counter_excess_limit
    assert official_counter_excess_limit(0.9, 0.05) == pytest.approx(10.0, rel=1e-14)  # 210 - 200 (chapter 1)
    assert official_counter_excess_limit(0.5, 0.1) == pytest.approx(8.0, rel=1e-14)
    assert official_counter_excess_limit(0.9, 0.5) == pytest.approx(-8.0, rel=1e-14)   # alpha + rho > 1: undershoot
    assert official_counter_excess_limit(0.9, 0.1) == 0.0                              # alpha + rho = 1
    assert official_counter_excess_limit(0.0, 0.1) == 0.0
    with pytest.raises(ValueError, match="alpha"):
        official_counter_excess_limit(0.9, 0.0)
    with pytest.raises(ValueError, match="momentum"):
        official_counter_excess_limit(1.0, 0.1)

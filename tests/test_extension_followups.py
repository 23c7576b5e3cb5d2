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


# ---------------------------------------------------------------- 2. a sampler callable in run_replicas and the stacked engine
def _uniform_sampler(p, q, seed):
    """A user's sampler that happens to draw exactly what sampling='uniform' draws."""
    from fedlib.sampling import sample_clients
    return lambda t: sample_clients("uniform", p, q, seed, t)


def _replica_setup():
    from fedlib.problems import random_quadratic
    from fedlib.schedules import RandomLocalWork
    from fedlib.solvers import momentum_sgd, sgd
    prob = random_quadratic(5, 3, seed=2, p=[0.1, 0.3, 0.2, 0.25, 0.15])
    work = RandomLocalWork([1, 1, 2, 3, 5], [2, 4, 6, 8, 9], num_solvers=2, seed=3)
    return prob, work, [sgd(0.03), momentum_sgd(0.03, 0.5)]


@pytest.mark.parametrize("aggregation", ["fedavg", "fednova"])
def test_run_replicas_takes_a_sampler_callable_and_draws_what_the_named_scheme_draws(aggregation):
    """run_replicas took scheme names only ('sampling must be one of ...' for a callable); a sampler
    drawing what 'uniform' draws now gives bit-identical runs."""
    from fedlib.engines.quadratic import run_replicas
    prob, work, solvers = _replica_setup()
    kw = dict(sigma=0.7, replicas=3, seed=7, x0=np.array([0.5, -1.0, 2.0]))
    named = run_replicas(prob, aggregation, solvers, work, 6, sampling="uniform", clients_per_round=3, **kw)
    own = run_replicas(prob, aggregation, solvers, work, 6, sampling=_uniform_sampler(prob.p, 3, 7), **kw)
    for field in ("params", "grad_norm2", "distance", "tau_eff", "chi2", "mean_local_steps"):
        np.testing.assert_array_equal(getattr(own, field), getattr(named, field), err_msg=field)


def test_run_replicas_with_a_fixed_weighted_sampler_equals_the_reference_loop():
    """Clients {1, 3} every round with weights (0.6, 0.4): run_replicas against run_sequential fed the same
    noise by noisy_grad_fn (which now takes the sampler too)."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.quadratic import client_solvers, noisy_grad_fn, run_replicas
    from fedlib.engines.reference import run_sequential
    from fedlib.sampling import Participation
    prob, work, solvers = _replica_setup()
    sampler = lambda t: Participation(np.array([1, 3]), np.array([0.6, 0.4]))  # noqa: E731
    x0 = np.array([0.5, -1.0, 2.0])
    run = run_replicas(prob, "fednova", solvers, work, 5, sigma=0.7, replicas=2, seed=7, x0=x0, sampling=sampler)
    for r in range(2):
        ref = run_sequential(make_algorithm("fednova", solvers[0]), x0,
                             noisy_grad_fn(prob, 0.7, 7, 2, r, work.local_steps, sampling=sampler), prob.p, work, 5,
                             solver_at=client_solvers(work, solvers), sampling=sampler, seed=7)
        np.testing.assert_allclose(run.params[r], ref.state.params, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.tau_eff, [d.tau_eff for d in ref.diagnostics], rtol=1e-13)
    # App. G's tau~ with a sampler: the mean tau of its (distinct) participants, here clients 1 and 3
    taus = np.array([work.draw(t)[0][[1, 3]].mean() for t in range(5)])
    assert run.mean_local_steps == pytest.approx(taus.mean(), rel=1e-15)


def test_run_replicas_refuses_a_sampler_with_clients_per_round():
    from fedlib.engines.quadratic import run_replicas
    prob, work, solvers = _replica_setup()
    with pytest.raises(ValueError, match="clients_per_round: a sampler callable chooses the participants itself"):
        run_replicas(prob, "fednova", solvers, work, 0, sampling=_uniform_sampler(prob.p, 3, 7), clients_per_round=3)
    with pytest.raises(ValueError, match="sampling must be one of"):
        run_replicas(prob, "fednova", solvers, work, 1, sampling="poisson")


def _tensor_engine(sampling, clients_per_round):
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.experiments.custom import TensorEngine
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd
    torch.manual_seed(0)
    model = nn.Linear(6, 3).double()
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(16, 6, generator=gen, dtype=torch.float64)
    labels = torch.arange(16) % 3
    parts = [np.arange(0, 3), np.arange(3, 8), np.arange(8, 12), np.arange(12, 16)]
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), parts, FixedSteps([1, 2, 3, 2]), seed=5,
                  sampling=sampling, clients_per_round=clients_per_round, lr_at=lambda t: 0.1)
    return TensorEngine(model, feats, labels, [run], rounds=3, batch_size=2, dropout=False, dtype=torch.float64)


def test_stacked_engine_takes_a_sampler_callable_and_draws_what_the_named_scheme_draws():
    """RunSpec.sampling took scheme names only; a sampler drawing what 'uniform' draws now trains the
    same model, bit for bit, as sampling='uniform'."""
    p = np.array([3, 5, 4, 4]) / 16
    named, own = _tensor_engine("uniform", 2), _tensor_engine(_uniform_sampler(p, 2, 5), None)
    for _ in range(3):
        rec_named, rec_own = named.run_round(), own.run_round()
        (a,), (b,) = rec_own, rec_named
        assert len(a.diagnostics.a_norms) == 2  # two of the four clients took part
        assert a.diagnostics.tau_eff == b.diagnostics.tau_eff and a.train_loss == b.train_loss
        np.testing.assert_array_equal(a.diagnostics.a_norms, b.diagnostics.a_norms)
    for key, value in named.params(0).items():
        assert torch.equal(own.params(0)[key], value), key


def test_stacked_engine_refuses_a_sampler_with_clients_per_round():
    with pytest.raises(ValueError, match=r"runs\[0\]\.clients_per_round: a sampler callable chooses"):
        _tensor_engine(lambda t: None, 2)


def test_train_clients_refuses_a_local_solver_object_pointing_to_the_supported_paths():
    """train_clients' solver is a name; a LocalSolver object met make_solver's generic error."""
    from torch import nn

    from fedlib.experiments.custom import train_clients
    from fedlib.solvers import sgd
    xs, ys = [torch.randn(4, 6), torch.randn(4, 6)], [torch.arange(4) % 3, torch.arange(4) % 3]
    with pytest.raises(ValueError, match=r"solver must be a name.*got a LocalSolver.*RunSpec\(make_algorithm\(name, "
                                         r"solver\), \.\.\.\).*TensorEngine.*ClientOptimizer"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, solver=sgd(0.05))

r"""The plain per-client loop: the reference every faster engine is tested against.

One client after another, one local step after another, exactly as
:mod:`fedlib.algorithms` describes a round. Used directly by the quadratic and
FedProx chapters (full-batch gradients), and by the tests of the batched engines.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional


from .._validate import check_int, check_probability_vector
from ..algorithms import FederatedAlgorithm, RoundDiagnostics, ServerState
from ..sampling import sample_clients

__all__ = ["run_sequential", "SequentialRun"]


class SequentialRun(NamedTuple):
    """Final server state and the per-round diagnostics (and user metrics)."""

    state: ServerState
    diagnostics: list
    metrics: list


def run_sequential(algorithm: FederatedAlgorithm, params: Any, grad_fn: Callable[..., Any], p: Any, schedule,
                   rounds: int, *, sampling: str = "full", clients_per_round: Optional[int] = None, seed: int = 0,
                   lr_at: Optional[Callable[[int], float]] = None,
                   metric_fn: Optional[Callable[[Any, int], Any]] = None) -> SequentialRun:
    r"""Run ``rounds`` rounds of ``algorithm`` one client at a time.

    Parameters
    ----------
    grad_fn : ``grad_fn(params, client, round, step) -> grads`` (a tree like ``params``).
    p : (m,) client weights :math:`p_i`.
    schedule : object with ``local_steps(round) -> (m,) ints`` (:mod:`fedlib.schedules`).
    sampling, clients_per_round, seed : participation (:mod:`fedlib.sampling`).
    lr_at : ``round -> client lr`` (default: the solver's lr every round).
    metric_fn : ``metric_fn(params, round) -> value`` recorded after every round
        (and once before the first, at index 0 of ``metrics``).
    """
    p = check_probability_vector("p", p)
    rounds = check_int("rounds", rounds, minimum=0)
    state = algorithm.init(params, p.size)
    diagnostics: list[RoundDiagnostics] = []
    metrics = [metric_fn(state.params, 0)] if metric_fn else []
    for t in range(rounds):
        lr = algorithm.solver.lr if lr_at is None else lr_at(t)
        solver = algorithm.solver.with_lr(lr)
        part = sample_clients(sampling, p, clients_per_round, seed, t)
        steps = schedule.local_steps(t)
        updates = []
        for i in part.clients:
            s = algorithm.client_init(state, int(i), solver)
            for k in range(int(steps[i])):
                s = solver.update(s, grad_fn(s.params, int(i), t, k))
            updates.append(algorithm.client_final(state, int(i), s))
        state, diag = algorithm.apply(state, part, updates, lr, p)
        diagnostics.append(diag)
        if metric_fn:
            metrics.append(metric_fn(state.params, t + 1))
    return SequentialRun(state, diagnostics, metrics)

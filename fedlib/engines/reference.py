r"""The plain per-client loop: the reference every faster engine is tested against.

One client after another, one local step after another, exactly as
:mod:`fedlib.algorithms` describes a round. Used directly by the quadratic and
FedProx chapters (chapters 2 and 3, full-batch gradients), chapter 7 (the surrogate
problem), chapter 8 (Theorem 3 with per-client solvers) and chapter 5 (the reference the
stacked engine is checked against), and by the tests of the batched engines.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from .._validate import check_callable, check_instance, check_int, check_probability_vector, round_lr
from ..algorithms import FederatedAlgorithm, RoundDiagnostics, ServerState, _requires_grad, server_state_mismatch
from ..solvers import LocalSolver, OwnStepChecks, _check_base_lr
from ..sampling import check_sampling, round_participation
from ..schedules import check_participant_steps, check_schedule_size, round_local_steps
from ..tree import tree_all_finite, tree_leaves

__all__ = ["run_sequential", "SequentialRun"]


class SequentialRun(NamedTuple):
    r"""What :func:`run_sequential` returns: the final server ``state``, one
    :class:`fedlib.algorithms.RoundDiagnostics` per round in ``diagnostics``, and ``metrics``:
    ``metric_fn``'s values before the first round and after each round (``rounds + 1`` of them; empty
    without ``metric_fn``).

    Example
    -------
    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> run = run_sequential(make_algorithm("fedavg", sgd(lr=0.5)), np.zeros(1), lambda x, i, t, k: x - 1.0,
    ...                      [1.0], FixedSteps([1]), rounds=2, metric_fn=lambda x, t: float(x[0]))
    >>> run.state.params, len(run.diagnostics), run.metrics
    (array([0.75]), 2, [0.0, 0.5, 0.75])
    """

    state: ServerState
    diagnostics: list
    metrics: list


def run_sequential(algorithm: FederatedAlgorithm, params: Any, grad_fn: Callable[..., Any], p: Any, schedule,
                   rounds: int, *, sampling: Any = "full", clients_per_round: Optional[int] = None, seed: int = 0,
                   lr_at: Optional[Callable[[int], float]] = None,
                   metric_fn: Optional[Callable[[Any, int], Any]] = None,
                   solver_at: Optional[Callable[[int, int], LocalSolver]] = None,
                   initial_state: Optional[ServerState] = None,
                   first_round: Optional[int] = None) -> SequentialRun:
    r"""Run ``rounds`` rounds of ``algorithm`` one client at a time.

    Parameters
    ----------
    grad_fn : ``grad_fn(params, client, round, step) -> grads`` (a tree like ``params``: ``None``, or
        gradients of another structure, leaf shape or array kind, is a ``ValueError`` naming ``grad_fn`` and
        the client, round and step of the call). Torch gradients that require grad (``create_graph=True``, or
        computed from tensors that require grad), or params that ``grad_fn`` made require grad in place, are
        refused the same way: every local step would extend one autograd graph through all later steps and
        rounds (memory without bound); the gradients are the step's data, :math:`x_{k+1} = x_k - \eta_k g_k`.
    p : (m,) client weights :math:`p_i`.
    schedule : object with ``local_steps(round) -> (m,)`` whole numbers :math:`\ge 0` (:mod:`fedlib.schedules`; participants need :math:`\ge 1`).
    sampling, clients_per_round, seed : participation (:mod:`fedlib.sampling`): a scheme name, or
        your own sampler ``round -> Participation`` (:func:`fedlib.sampling.round_participation`).
    lr_at : ``round -> client lr`` (default: the solver's lr every round). A solver with its own step is probed
        (:func:`fedlib.solvers.check_own_step`) at each other round lr once, as the algorithm probed it at its own: a
        step that ignores ``self.lr`` is refused in the first round that takes another lr.
    metric_fn : ``metric_fn(params, round) -> value`` recorded after every round
        (and once before the first, at index 0 of ``metrics``).
    solver_at : ``(round, client) -> LocalSolver``: each client's own local solver in each
        round (Theorem 3: :math:`a_i^{(t)}` may change with the client and the round; each
        client reports the :math:`\|a_i\|_1` of the solver it ran). It replaces
        ``algorithm.solver`` on the clients and cannot be combined with ``lr_at``; every
        solver it returns must have ``algorithm.solver.lr`` as its base learning rate, the
        unit of :math:`\|a_i\|_1` (:func:`fedlib.solvers.check_shared_lr`: a client's own step
        size is a constant ``lr_schedule`` factor).
    initial_state : start from this server state (e.g. one with chosen control variates,
        or the state of an earlier run) instead of ``algorithm.init(params, m)``; ``params``
        must then be ``None``. Rounds count on from ``initial_state.round`` (see ``first_round``). It must
        fit ``algorithm`` (control variates exactly when it uses them, the state its server optimizer
        keeps: :func:`fedlib.algorithms.server_state_mismatch`), ``p`` and a finite model, and hold no
        tensor that requires grad (``ValueError`` otherwise).
    first_round : the index of this call's first round: its rounds are
        ``first_round, ..., first_round + rounds - 1`` for ``lr_at``, the schedule, the sampler,
        ``grad_fn``, ``solver_at`` and ``metric_fn`` (whose first value is
        ``metric_fn(params, first_round)``). Default: ``initial_state.round`` (the rounds the state
        has seen), 0 without ``initial_state``. So the state a run ended on, given back as
        ``initial_state`` with the same ``seed``, continues that run exactly: the two calls together
        give what one call of all the rounds gives, bit for bit, also with random participation and
        random local steps. ``first_round=0`` starts the schedules, the sampler and ``lr_at`` afresh
        from a saved state (e.g. a new run from an old model).

    Returns
    -------
    :class:`SequentialRun`
        The final server ``state``, the per-round ``diagnostics`` and the ``metrics``. The faster
        engines (:func:`fedlib.engines.batched.run_batched`, :class:`fedlib.engines.stacked.StackedEngine`)
        are tested to give the same numbers.

    Example
    -------
    Two clients with :math:`F_i(x) = \tfrac12 (x - c_i)^2`, :math:`c = (0, 1)`, :math:`p = (1/2, 1/2)`,
    :math:`\tau = (1, 2)` steps of SGD with :math:`\eta = 1/2` from :math:`x = 0`. Client 0 is at its
    optimum (:math:`\Delta_0 = 0`); client 1 steps to :math:`1/2`, then :math:`3/4` (:math:`\Delta_1 = 3/4`,
    :math:`\|a_1\|_1 = 2`). FedAvg moves to :math:`\tfrac12 \cdot \tfrac34 = 0.375`; FedNova to
    :math:`\eta\,\tau_{\text{eff}} \cdot \tfrac12 \cdot \tfrac{3/4}{\eta \cdot 2} = \tfrac32 \cdot \tfrac3{16}
    = 0.28125` (:math:`\tau_{\text{eff}} = \tfrac12(1 + 2) = 1.5`):

    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> centres = np.array([0.0, 1.0])
    >>> def grad_fn(x, client, round_index, step):
    ...     return x - centres[client]
    >>> def run(name, rounds):
    ...     return run_sequential(make_algorithm(name, sgd(lr=0.5)), np.zeros(1), grad_fn, [0.5, 0.5],
    ...                           FixedSteps([1, 2]), rounds)
    >>> run("fedavg", 1).state.params, run("fednova", 1).state.params, run("fednova", 1).diagnostics[0].tau_eff
    (array([0.375]), array([0.28125]), 1.5)

    Every round is the same affine map: FedAvg's :math:`x \mapsto \tfrac38 x + \tfrac38` has its fixed
    point at :math:`3/5`, pulled towards the client with more steps; FedNova's
    :math:`x \mapsto \tfrac{11}{32} x + \tfrac9{32}` at :math:`3/7` (the global optimum is :math:`1/2`;
    FedNova's gap is the :math:`O(\eta)` term that chapter 2 sends to 0 with :math:`\eta`). Forty rounds reach both:

    >>> round(float(run("fedavg", 40).state.params[0]), 12), round(float(run("fednova", 40).state.params[0]) * 7, 12)
    (0.6, 3.0)
    """
    check_instance("algorithm", algorithm, FederatedAlgorithm, " (fedlib.algorithms.make_algorithm(...))")
    p = check_probability_vector("p", p)
    check_schedule_size(schedule, p.size)
    rounds = check_int("rounds", rounds, minimum=0)
    seed = check_int("seed", seed)  # with full participation no draw uses it, but a wrong one is a mistake all the same
    if first_round is not None:
        first_round = check_int("first_round", first_round, minimum=0)
    check_sampling(sampling, clients_per_round)
    for name, fn, contract, nargs in (("grad_fn", grad_fn, "(params, client, round, step) -> grads", 4),
                                      ("lr_at", lr_at, "round -> client lr", 1),
                                      ("metric_fn", metric_fn, "(params, round) -> value", 2),
                                      ("solver_at", solver_at, "(round, client) -> LocalSolver", 2)):
        if fn is not None or name == "grad_fn":
            hint = (" (one solver for every client: make_algorithm(name, solver))" if isinstance(fn, LocalSolver) else
                    " (a constant rate: lr_at=None uses the solver's lr)" if name == "lr_at" else "")
            check_callable(name, fn, contract, hint, nargs=nargs)
    if solver_at is not None and lr_at is not None:
        raise ValueError("solver_at and lr_at cannot be combined: each client's solver carries its own lr")
    if initial_state is None:
        state = algorithm.init(params, p.size)
    else:
        if params is not None:
            raise ValueError("params must be None when initial_state is given (the state holds the model)")
        if not isinstance(initial_state, ServerState):
            raise ValueError(f"initial_state must be a fedlib.algorithms.ServerState, got {type(initial_state).__name__}")
        if (initial_state.variates is None) != (algorithm.variance is None):
            raise ValueError(f"initial_state: {algorithm.name!r} needs "
                             f"{'control variates' if algorithm.variance else 'no control variates'}")
        if initial_state.num_clients is not None and initial_state.num_clients != p.size:
            raise ValueError(f"initial_state is a server state for {initial_state.num_clients} clients but p has "
                             f"{p.size} (to start a run of other clients from its model, pass "
                             "params=initial_state.params instead)")
        why = server_state_mismatch(algorithm, initial_state)  # else a crash, or the saved buffer dropped
        if why is not None:
            raise ValueError(f"initial_state: {why}")
        try:
            finite = tree_all_finite(initial_state.params)
        except TypeError:
            finite = False
        for part in ("params", "variates", "server"):  # as algorithm.init refuses params that require grad
            k = _requires_grad(getattr(initial_state, part))
            if k is not None:
                raise ValueError(f"initial_state.{part}: leaf {k} is a tensor that requires grad; every round's "
                                 "update would be recorded in an autograd graph that grows without bound: give "
                                 "detached tensors (t.detach())")
        if not finite:  # else round 0 would report a divergence of the aggregated update
            raise ValueError("initial_state.params hold NaN or inf, or are no tree of numbers (the starting model "
                             "must be finite)")
        state = initial_state
    if first_round is None:  # a saved state continues its run
        first_round = 0 if initial_state is None else check_int("initial_state.round", initial_state.round, minimum=0)
    vr = algorithm.variance is not None  # a solver_at solver must then add the clients' corrections
    torch_model = any(hasattr(leaf, "requires_grad") for leaf in tree_leaves(state.params))
    checks = OwnStepChecks()  # this run's: each distinct solver_at solver is probed once, where it first appears
    diagnostics: list[RoundDiagnostics] = []
    metrics = [metric_fn(state.params, first_round)] if metric_fn else []
    for t in range(first_round, first_round + rounds):
        lr = round_lr("lr_at", lr_at, t, algorithm.solver.lr)
        solver = algorithm.solver.with_lr(lr)
        if solver_at is None:  # an own step probed at this round's lr too (the algorithm probed it at its own)
            checks.check_round_lr(algorithm.solver, solver, t, correction=vr)
        part = round_participation(sampling, p, clients_per_round, seed, t)
        steps = round_local_steps(schedule, t, p.size)
        check_participant_steps(steps, part.clients, t)  # before any client of the round trains
        updates = []
        for i in part.clients:
            own = solver if solver_at is None else _client_solver(solver_at, t, int(i), lr, vr, checks)
            s = algorithm.client_init(state, int(i), own)
            for k in range(int(steps[i])):
                x = s.params
                grads = grad_fn(x, int(i), t, k)
                try:
                    s = own.update(s, grads)
                except (ValueError, TypeError) as exc:  # the solver names grads: say which grad_fn call returned them
                    _refuse_grads(exc, grads, int(i), t, k)
                    raise
                if torch_model and _requires_grad(s.params) is not None:  # else one graph through all steps, rounds
                    _refuse_graph(x, grads, int(i), t, k)
            updates.append(algorithm.client_final(state, int(i), s))
        state, diag = algorithm.apply(state, part, updates, lr, p)
        diagnostics.append(diag)
        if metric_fn:
            metrics.append(metric_fn(state.params, t + 1))
    return SequentialRun(state, diagnostics, metrics)


def _refuse_graph(params: Any, grads: Any, client: int, round_index: int, step: int) -> None:
    """The ``ValueError`` for a local step whose new parameters require grad: ``grads`` (what ``grad_fn`` returned
    for ``params``) require grad, or ``grad_fn`` made ``params`` require grad in place. Each step would extend one
    autograd graph through every later step, client update and round (memory without bound)."""
    call = f"grad_fn(params, client={client}, round={round_index}, step={step})"
    growth = ("every local step would be recorded in an autograd graph that grows over the steps and rounds "
              "(memory without bound)")
    k = _requires_grad(grads)
    if k is not None:
        raise ValueError(f"grad_fn returned gradients that require grad ({call}, leaf {k}: computed with "
                         "torch.autograd.grad(..., create_graph=True), or from tensors that require grad such as a "
                         f"model's parameters); {growth}: return detached gradients (g.detach(), or compute them "
                         "under torch.no_grad())")
    k = _requires_grad(params)
    if k is not None:
        raise ValueError(f"grad_fn made params require grad ({call}: leaf {k} of the params it was given requires "
                         "grad after the call: params[...].requires_grad_() in place? at step 0 they are the server's "
                         f"model); {growth}: differentiate detached copies, "
                         "w = [t.detach().requires_grad_() for t in params]")
    raise ValueError(f"solver: its update after {call} returned parameters that require grad, though neither the "
                     f"gradients nor the params it was given do (a solver of your own?); {growth}")


def _refuse_grads(exc: Exception, grads: Any, client: int, round_index: int, step: int) -> None:
    """Re-raise the solver's ``ValueError`` about ``grads`` as one naming ``grad_fn`` and the call that returned
    them (the solver knows neither: "grads: a leaf has shape () but the parameter has (2,)" was all a grad_fn
    without a ``return`` got); nothing for any other error of the step (the caller re-raises it)."""
    call = f"grad_fn(params, client={client}, round={round_index}, step={step})"
    if grads is None:
        raise ValueError(f"grad_fn returned None ({call}; a missing return statement?): it must return the "
                         "gradients, a tree like params (the same structure, leaf shapes and array kind)") from None
    if isinstance(exc, ValueError) and str(exc).startswith("grads"):
        raise ValueError(f"grad_fn must return a tree like params: {call} returned {type(grads).__name__} "
                         f"gradients that do not fit ({exc})") from None


def _client_solver(solver_at, round_index: int, client: int, lr: float, correction: bool,
                   checks: OwnStepChecks) -> LocalSolver:
    """``solver_at(round_index, client)`` checked: a LocalSolver (:func:`fedlib.solvers.check_own_step` through the
    run's ``checks``, so a solver seen earlier in the run is not probed again) with base learning rate ``lr``."""
    solver = solver_at(round_index, client)
    if not isinstance(solver, LocalSolver):
        raise ValueError(f"solver_at({round_index}, {client}) must return a LocalSolver, got {type(solver).__name__}")
    checks.check(f"solver_at({round_index}, {client})", solver, correction=correction)
    # the solver alone: a list of one named it 'solver_at(0, 1) -> solvers[0]', as if client 0's
    _check_base_lr(f"solver_at({round_index}, {client})'s solver", solver, lr)
    return solver

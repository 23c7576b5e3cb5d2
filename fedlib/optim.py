r"""FedNova in your own PyTorch training loop: a local solver as a ``torch.optim.Optimizer``.

The update rule (eq. 4) asks one thing of a client beyond its change
:math:`\Delta_i = x_i^{(t,\tau_i)} - x^{(t,0)}`: the norm :math:`\|a_i\|_1` of its local
solver's aggregation vector. :class:`ClientOptimizer` takes the steps of a
:class:`fedlib.solvers.LocalSolver` on a model's parameters inside any loop that calls
``loss.backward(); opt.step()`` — your ``DataLoader``, your loss, your model — and tracks
:math:`\|a_i\|_1` online while it runs (:meth:`fedlib.solvers.LocalSolver.counter_step`).
The server side is :meth:`fedlib.algorithms.FederatedAlgorithm.apply`, unchanged:

.. math::

    x^{(t+1,0)} = x^{(t,0)} - \tau_{\text{eff}} \sum_i w_i\, \eta\, d_i,
    \qquad d_i = -\frac{\Delta_i}{\eta\,\|a_i\|_1},

with FedNova's :math:`w_i = p_i`, :math:`\tau_{\text{eff}} = \sum_i p_i\|a_i\|_1`, or any other
algorithm of :mod:`fedlib.algorithms` (FedAvg, FedProx, SCAFFOLD, FedNova-VR, server momentum).

A round, in user code (chapter 6 runs it)::

    algo = make_algorithm("fednova", momentum_sgd(lr=0.02, weight_decay=1e-4))
    server = algo.init(parameters_of(model), num_clients=m)
    opt = ClientOptimizer(model.parameters(), algo.solver)
    for t in range(rounds):
        updates = []
        for i in range(m):
            opt.begin(algo.client_init(server, i))     # x^(t,0) into the model, buffers reset
            for x, y in loaders[i]:                    # tau_i local steps, any number
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            updates.append(algo.client_final(server, i, opt.solver_state))
        server, diag = algo.apply(server, full_participation(p), updates, opt.lr, p)
        copy_into(model.parameters(), server.params)   # the new global model x^(t+1,0) into model

After a client's local steps ``model`` holds that client's :math:`x_i^{(t,\tau_i)}`; the global
model is ``server.params``, so copy it back (last line) before evaluating or saving ``model``.

With plain SGD or heavy-ball momentum and weight decay these are the steps of
``torch.optim.SGD(lr, momentum, weight_decay=...)`` (``dampening=0``, no Nesterov; the
tests compare the two), so an existing training loop changes in the optimizer's line only.
The step uses ``torch._foreach_*`` kernels, those of ``torch.optim.SGD`` on CUDA; on the CPU
``torch.optim.SGD`` defaults to a per-tensor loop of the same operations, which gives the same
float32/float64 numbers but rounds bfloat16/float16 parameters differently (``foreach=True`` matches).

Rules, each enforced with an error rather than a silent change of the algorithm:

* one parameter group; momentum, :math:`\mu` and weight decay are set on the solver, and the optimizer steps
  with its own solver: build it with the algorithm's, ``ClientOptimizer(model.parameters(), algo.solver)``
  (a round's start made by a solver with a proximal anchor or a momentum buffer that the optimizer's solver
  does not keep, or the reverse, is refused by :meth:`ClientOptimizer.begin`: an optimizer built with plain
  SGD and reused for FedProx ran FedAvg);
* trainable parameters only (``requires_grad``): a frozen one would still be moved by weight
  decay and the proximal term, so it is refused — pass the same subset to :func:`parameters_of`;
* the learning rate may change between rounds (a ``torch.optim.lr_scheduler`` stepped once
  per round; :meth:`ClientOptimizer.begin` reads the group's ``lr``), never within a round,
  since :math:`a_i` depends on every step size of the round;
* a parameter whose ``grad`` is ``None`` in a step takes the step with a zero gradient
  (its weight decay, momentum and proximal terms still act): every parameter takes every
  local step, as eq. (4) assumes (``torch.optim.SGD`` would skip it);
* the optimizer state is the round's :class:`fedlib.solvers.SolverState`: ``state_dict`` and
  ``load_state_dict`` raise ``NotImplementedError``, and the optimizer cannot be copied or
  pickled (checkpoint the server state between rounds instead, :func:`fedlib.checkpoint.save_checkpoint`; it is
  stored as numpy arrays, which :func:`fedlib.checkpoint.to_torch_tree` turns back into tensors to resume);
* each parameter once (a tied weight listed twice would take every step twice);
* reading :attr:`ClientOptimizer.solver_state` (for ``algorithm.client_final``) ends the client's round: a
  ``step`` after it is a ``RuntimeError`` until the next :meth:`ClientOptimizer.begin` (a forgotten ``begin``
  continued the previous client's round, its iterate, step count and :math:`\|a_i\|_1`, under the next client's
  name); ``opt.local_steps`` and ``opt.a_norm`` watch a round in progress.

Buffers (BatchNorm running statistics) are not parameters moved by gradient steps and are
outside the update rule: give each client the global buffers at the start of its round
(:func:`copy_into` on ``model.buffers()``) and average the clients' ones after it
(:func:`buffers_of`, :func:`average_buffers` with weights :math:`p_i`); normalising them by
:math:`\|a_i\|_1` is a known mistake of existing implementations. They are not in the server state either: to
resume, checkpoint them with it, e.g. ``save_checkpoint(path, ..., state={"server": server, "buffers": buffers})``
(a run resumed without them trains the same parameters, training mode normalising with each batch's statistics,
but its running statistics restart from the model's initial ones, so its evaluations differ).

Example
-------
>>> import torch
>>> from fedlib.solvers import momentum_sgd
>>> w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
>>> solver = momentum_sgd(lr=0.1, momentum=0.5)
>>> opt = ClientOptimizer([w], solver)
>>> opt.begin(solver.init([torch.zeros(2, dtype=torch.float64)]))
>>> for _ in range(3):
...     opt.zero_grad()
...     (w - 1.0).pow(2).sum().backward()
...     opt.step()
>>> opt.local_steps, round(opt.a_norm, 12), round(solver.a_norm(3), 12)
(3, 4.25, 4.25)
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Iterable, List, Optional, Sequence

import torch

from ._validate import a_type, check_agree
from .solvers import LocalSolver, OwnStepChecks, SolverState, check_own_step, check_shared_lr

__all__ = ["ClientOptimizer", "parameters_of", "copy_into", "buffers_of", "average_buffers"]


def parameters_of(model) -> List[torch.Tensor]:
    """Detached copies of ``model.parameters()`` (or of an iterable of parameters, e.g. the
    trainable ones only), in order: the global model of
    :meth:`fedlib.algorithms.FederatedAlgorithm.init` for a :class:`ClientOptimizer` on the
    same parameters (chapter 6).

    Example
    -------
    ``Linear(2, 1)`` has a weight ``(1, 2)`` and a bias ``(1,)``; the copies do not follow later
    changes of the model:

    >>> layer = torch.nn.Linear(2, 1)
    >>> snapshot = parameters_of(layer)
    >>> [tuple(t.shape) for t in snapshot], snapshot[0].requires_grad
    ([(1, 2), (1,)], False)
    >>> with torch.no_grad():
    ...     _ = layer.bias.fill_(5.0)
    >>> bool(snapshot[1] == 5.0)
    False
    """
    if isinstance(model, torch.nn.Module):
        params = list(model.parameters())
    elif isinstance(model, torch.Tensor) or not hasattr(model, "__iter__"):
        raise ValueError(f"model must be a torch.nn.Module or an iterable of parameters, got {type(model).__name__}")
    elif isinstance(model, Mapping):  # a state_dict iterates over its names (and holds the buffers too)
        raise ValueError(f"model: an iterable of parameters must hold tensors only, got {a_type(model)} "
                         "keyed by name (a state_dict also holds the buffers): pass the model, model.parameters(), "
                         "or a subset in the model's order, [p for name, p in model.named_parameters() if ...]")
    else:
        params = list(model)
        bad = next((k for k, p in enumerate(params) if not isinstance(p, torch.Tensor)), None)
        if bad is not None:
            v = params[bad]
            if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], torch.Tensor):
                raise ValueError("model: an iterable of parameters must hold tensors only, got (name, parameter) "
                                 "pairs (model.named_parameters()): pass model.parameters(), or a subset, "
                                 "[p for name, p in model.named_parameters() if ...]")
            raise ValueError(f"model: an iterable of parameters must hold tensors only, but entry {bad} is "
                             f"{a_type(v)}")
    return [p.detach().clone() for p in params]


def copy_into(params: Iterable[torch.Tensor], values: Sequence[torch.Tensor]) -> None:
    """Copy ``values`` (e.g. a server state's ``params``) into ``params`` in place, checking
    count, shapes, dtypes and devices (to evaluate the global model with your own code; chapter 6). ``params`` is
    an iterable of the parameters, ``model.parameters()``: the model itself, or one tensor, is a ``ValueError``.

    Example
    -------
    >>> layer = torch.nn.Linear(2, 1)
    >>> copy_into(layer.parameters(), [torch.ones(1, 2), torch.full((1,), 3.0)])
    >>> layer.weight.tolist(), layer.bias.tolist()
    ([[1.0, 1.0]], [3.0])

    Values in another order (here the bias first) are refused, naming the first mismatch:

    >>> copy_into(layer.parameters(), [torch.zeros(1), torch.zeros(1, 2)])
    Traceback (most recent call last):
    ...
    ValueError: values[0] is torch.float32 (1,) on cpu but parameter 0 is torch.float32 (1, 2) on cpu
    """
    params = _parameter_list(params)
    _check_like(params, values, "values")
    with torch.no_grad():
        for p, v in zip(params, values):
            p.copy_(v)


def buffers_of(model: torch.nn.Module) -> List[torch.Tensor]:
    """Detached copies of ``model.buffers()`` (BatchNorm running statistics...), in order.

    Example
    -------
    ``BatchNorm1d(2)`` has three buffers: running mean and variance, and the integer
    ``num_batches_tracked``:

    >>> [(tuple(b.shape), b.dtype) for b in buffers_of(torch.nn.BatchNorm1d(2))]
    [((2,), torch.float32), ((2,), torch.float32), ((), torch.int64)]
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [b.detach().clone() for b in model.buffers()]


def average_buffers(client_buffers: Sequence[Sequence[torch.Tensor]], weights) -> List[torch.Tensor]:
    r"""The clients' buffers averaged with ``weights`` (normalised to sum 1, e.g. :math:`p_i` of
    the round's participants): :math:`\sum_i w_i b_i` for floating-point buffers (running means
    and variances), rounded to the nearest integer for integer ones (``num_batches_tracked``).

    Buffers are not moved by gradient steps, so they take no part in the update rule: no
    :math:`\|a_i\|_1`, no :math:`\tau_{\text{eff}}` (normalising them as gradient progress is a
    known mistake). Give each client the averaged buffers at the start of its
    round (:func:`copy_into` on ``model.buffers()``) and average theirs after it.

    ``client_buffers`` lists the clients' buffers, one list of tensors per client (``buffers_of(model)``) in the order
    of ``weights``, every client's of the same shapes and dtypes; a mapping, a bare tensor or an empty list is a
    ``ValueError``. ``weights`` are finite numbers :math:`\ge 0` with a positive sum, one per client. Returns one
    tensor per buffer, of the first client's dtype.

    Example
    -------
    Two clients with weights :math:`(1, 3)`, i.e. :math:`(1/4, 3/4)`: running means :math:`(0, 0)`
    and :math:`(1, 2)` average to :math:`(3/4, 3/2)`; batch counts 1 and 2 to :math:`1.75`, rounded to 2:

    >>> client_0 = [torch.tensor([0.0, 0.0]), torch.tensor(1)]
    >>> client_1 = [torch.tensor([1.0, 2.0]), torch.tensor(2)]
    >>> mean, count = average_buffers([client_0, client_1], [1, 3])
    >>> mean.tolist(), count.item(), count.dtype
    ([0.75, 1.5], 2, torch.int64)
    """
    if isinstance(client_buffers, Mapping):  # iterating it gave its keys: 'client_buffers[0] ... got int'
        raise ValueError(f"client_buffers must list the clients' buffers (one buffers_of(model) per client), got "
                         f"{a_type(client_buffers)}; pass a list in the order of weights, e.g. "
                         "[client_buffers[k] for k in sorted(client_buffers)]")
    client_buffers = list(client_buffers)
    for i, bufs in enumerate(client_buffers):  # a tensor iterates over its rows: one model's buffers are no clients
        if isinstance(bufs, torch.Tensor) or not hasattr(bufs, "__iter__"):
            raise ValueError(f"client_buffers[{i}] must be one client's buffers, a list of tensors "
                             f"(buffers_of(model)), got {type(bufs).__name__}: client_buffers lists the clients")
    client_buffers = [list(b) for b in client_buffers]
    if not client_buffers:
        raise ValueError("client_buffers: no client")
    try:
        w = torch.as_tensor(weights, dtype=torch.float64).flatten()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"weights must be {len(client_buffers)} numbers, got {weights!r} ({exc})") from None
    # either may be the wrong one: 'weights must be 3 finite numbers ...' blamed weights for a client too many
    check_agree("weights", w.numel(), "client_buffers", len(client_buffers))
    if not torch.all(torch.isfinite(w)) or torch.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be {len(client_buffers)} finite numbers >= 0 with a positive sum")
    w = w / w.sum()
    first = client_buffers[0]
    for i, bufs in enumerate(client_buffers):
        _check_like(first, bufs, f"client_buffers[{i}]", noun="buffer")
    out = []
    for k, ref in enumerate(first):
        stack = torch.stack([bufs[k].detach() for bufs in client_buffers]).to(torch.float64)
        mean = torch.tensordot(w.to(stack.device), stack, dims=1)
        out.append(mean.to(ref.dtype) if ref.is_floating_point() else mean.round().to(ref.dtype))
    return out


def _parameter_list(params) -> List[torch.Tensor]:
    """``params`` (an iterable of the model's parameters) as a list; a model or a single tensor is refused by name
    (iterating a model failed with "'Linear' object is not iterable", a tensor iterated over its rows)."""
    if isinstance(params, torch.nn.Module):
        raise ValueError(f"params must be the model's parameters (model.parameters()), got the model itself, "
                         f"{a_type(params)}")
    if isinstance(params, torch.Tensor) or not hasattr(params, "__iter__"):
        raise ValueError(f"params must be an iterable of the model's parameters (model.parameters(), or [w] for one "
                         f"tensor w), got {type(params).__name__}")
    return list(params)


def _check_like(params: List[torch.Tensor], values, what: str, noun: str = "parameter") -> None:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, torch.Tensor) for v in values):
        builder = "parameters_of(model)" if noun == "parameter" else "buffers_of(model)"
        got = type(values).__name__
        if isinstance(values, (list, tuple)):  # name the first entry that is not a tensor (numpy arrays, say)
            k, v = next((k, v) for k, v in enumerate(values) if not isinstance(v, torch.Tensor))
            got += f" whose entry {k} is a {type(v).__module__}.{type(v).__qualname__}"
            if hasattr(v, "__array__") and not isinstance(v, torch.Tensor):  # e.g. a checkpoint's numpy state
                got += (" (a checkpoint stores the server state as numpy arrays: "
                        "fedlib.checkpoint.to_torch_tree(state, like=parameters_of(model)) turns it back into tensors)")
        elif isinstance(values, dict):  # a state_dict or dict(named_parameters()): keyed by name, not in order
            got += " (keyed by name; give the tensors as a list in the model's parameter order)"
        raise ValueError(f"{what} must be a list of tensors, one per {noun} in the model's order "
                         f"({builder} builds it), got {got}")
    if len(values) != len(params):
        raise ValueError(f"{what} has {len(values)} tensors but there are {len(params)} {noun}s")
    for k, (p, v) in enumerate(zip(params, values)):
        if v.shape != p.shape or v.dtype != p.dtype or v.device != p.device:
            raise ValueError(f"{what}[{k}] is {v.dtype} {tuple(v.shape)} on {v.device} but {noun} {k} is "
                             f"{p.dtype} {tuple(p.shape)} on {p.device}")


def _step_in_place(solver: LocalSolver, state: SolverState, params: List[torch.Tensor],
                   grads: List[torch.Tensor]) -> SolverState:
    r""":meth:`fedlib.solvers.LocalSolver.update` in place on ``params`` (and the momentum
    buffer), with multi-tensor ``torch._foreach_*`` kernels as ``torch.optim.SGD(foreach=True)`` uses
    (its default on CUDA, not on the CPU): the same arithmetic, :math:`\tilde g = g + \lambda x + c`,
    :math:`u \leftarrow \rho u + \tilde g`,
    :math:`x \leftarrow x - \eta_k (u + \mu (x - x^{(t,0)}))`, without copying the model.
    The gradients are never written (the caller's ``.grad`` stay as they were)."""
    k = state.step
    d = list(grads)
    if solver.weight_decay:
        d = torch._foreach_add(d, params, alpha=solver.weight_decay)
    if state.correction is not None:
        d = torch._foreach_add(d, list(state.correction))
    momentum = state.momentum
    if momentum is not None:
        torch._foreach_mul_(momentum, solver.momentum)
        torch._foreach_add_(momentum, d)
        d = momentum
    if state.anchor is not None:  # the proximal term, outside the momentum buffer
        d = torch._foreach_add(d, torch._foreach_sub(params, list(state.anchor)), alpha=solver.mu)
    torch._foreach_add_(params, d, alpha=-solver.step_size(k))
    counter = solver.counter_step(k, state.shadow)
    return state._replace(step=k + 1, momentum=momentum, shadow=counter, a_norm=counter[0])


def _check_solver_made(given: SolverState, fresh: SolverState, solver: LocalSolver) -> None:
    r"""Refuse a round's start ``given`` (``algorithm.client_init(server, i)``) that another kind of solver made
    than the optimizer's ``solver`` (whose own start is ``fresh``): one with a proximal anchor or a momentum buffer
    where ``solver`` keeps none, or the reverse. The optimizer steps with its own solver, so an optimizer built
    with plain SGD and reused for FedProx (``make_algorithm("fedprox", proximal_sgd(lr, mu))``) dropped the
    proximal term and ran FedAvg, and one reused for a momentum solver ran without momentum, without a word."""
    for part, term, field in (("anchor", "proximal anchor", "mu"), ("momentum", "momentum buffer", "momentum")):
        has, keeps = getattr(given, part) is not None, getattr(fresh, part) is not None
        if has != keeps:
            raise ValueError(
                f"solver_state {'has a' if has else 'has no'} {term} (a solver with {field} "
                f"{'> 0' if has else '= 0'} made it, e.g. the algorithm's: algorithm.client_init), but the "
                f"optimizer's solver {type(solver).__name__}(name={solver.name!r}, {field}={getattr(solver, field)!r}) "
                f"{'keeps none' if has else 'keeps one'}: it would run its own step, "
                f"{'without' if has else 'with'} that term; build the optimizer with the algorithm's solver, "
                "ClientOptimizer(model.parameters(), algorithm.solver) (one optimizer per algorithm), or give the "
                "round's solver to begin(solver_state, solver=...)")


class ClientOptimizer(torch.optim.Optimizer):
    r"""A :class:`fedlib.solvers.LocalSolver` stepping ``params`` in a user's training loop.

    Each round: :meth:`begin` with the client's starting
    :class:`~fedlib.solvers.SolverState` (``algorithm.client_init(server, i)``: the global
    model :math:`x^{(t,0)}`, and the control-variate correction of SCAFFOLD / FedNova-VR),
    then ``loss.backward(); opt.step()`` for each local step, then
    ``algorithm.client_final(server, i, opt.solver_state)``. A step is
    :meth:`fedlib.solvers.LocalSolver.update` with the parameters' gradients:
    :math:`\tilde g_k = g_k + \lambda x_k + c_i`, :math:`u_{k+1} = \rho u_k + \tilde g_k`,
    :math:`x_{k+1} = x_k - \eta_k (u_{k+1} + \mu (x_k - x^{(t,0)}))`; the state's
    ``a_norm`` is :math:`\|a^{(k)}\|_1` after :math:`k` steps (App. B).
    The step works in place with multi-tensor kernels, as ``torch.optim.SGD(foreach=True)`` does; the
    tests check it against :meth:`~fedlib.solvers.LocalSolver.update`. A solver subclass with its own
    step (:attr:`~fedlib.solvers.LocalSolver.builtin_step` false, e.g. Nesterov momentum) takes its own
    ``update`` instead, out of place on copies of the parameters, copied back into them (its result
    must be a ``SolverState`` with parameters like the model's and ``step`` advanced by one); its
    :math:`\|a_i\|_1` is its own ``counter_step``'s. Such a solver (and one with its own closed forms) is probed
    first, here and by :meth:`begin` for a round's solver (:func:`fedlib.solvers.check_own_step`): one whose
    counter does not report the :math:`\|a_i\|_1` of its update, or whose update is not linear in the
    gradients, is a ``ValueError`` naming its class, never run with the built-in step or counter. Used by
    chapter 6.

    Parameters
    ----------
    params
        The model's parameters, an iterable of tensors (one group, e.g. ``model.parameters()``), in
        the order of the server state's ``params`` (:func:`parameters_of`).
    solver
        The :class:`~fedlib.solvers.LocalSolver` (:func:`fedlib.solvers.momentum_sgd`, ...; usually
        ``algorithm.solver``). Its ``lr`` is the group's initial ``lr`` (a parameter-group dict
        with another ``lr`` is refused; a scheduler may change it between rounds).

    Example
    -------
    One round on a scalar model, two clients with :math:`F_i(w) = \tfrac12 (w - c_i)^2`,
    :math:`c = (1, -1)`, :math:`p = (1/2, 1/2)`, SGD with :math:`\eta = 0.1` from :math:`w = 0`;
    client 0 takes :math:`\tau_0 = 1` step (:math:`\Delta_0 = 0.1`), client 1 takes :math:`\tau_1 = 3`
    (:math:`w = -0.1, -0.19, -0.271`), and SGD's :math:`\|a_i\|_1 = \tau_i`. FedAvg averages the
    changes, :math:`\tfrac12(0.1 - 0.271) = -0.0855`, pulled towards client 1's :math:`c_1 = -1`;
    FedNova uses :math:`d_0 = -1`, :math:`d_1 = 0.271/0.3` and :math:`\tau_{\text{eff}} = 2`:
    :math:`-2 \cdot 0.1 \cdot \tfrac12(-1 + 0.90\overline{3}) = 0.009\overline{6}`, near the optimum 0:

    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.sampling import full_participation
    >>> from fedlib.solvers import sgd
    >>> def one_round(name, targets=(1.0, -1.0), steps=(1, 3), p=(0.5, 0.5)):
    ...     w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    ...     algo = make_algorithm(name, sgd(lr=0.1))
    ...     server = algo.init(parameters_of([w]), num_clients=2)
    ...     opt = ClientOptimizer([w], algo.solver)
    ...     updates = []
    ...     for i in range(2):
    ...         opt.begin(algo.client_init(server, i))          # x^(t,0) into w
    ...         for _ in range(steps[i]):
    ...             opt.zero_grad()
    ...             (0.5 * (w - targets[i]) ** 2).sum().backward()
    ...             opt.step()
    ...         updates.append(algo.client_final(server, i, opt.solver_state))
    ...     server, diagnostics = algo.apply(server, full_participation(p), updates, opt.lr, p)
    ...     copy_into([w], server.params)
    ...     return round(w.item(), 6), opt.local_steps, opt.a_norm, diagnostics.weights.tolist()
    >>> one_round("fedavg")
    (-0.0855, 3, 3.0, [0.25, 0.75])
    >>> one_round("fednova")
    (0.009667, 3, 3.0, [0.5, 0.5])
    """

    def __init__(self, params: Iterable[torch.Tensor], solver: LocalSolver):
        if not isinstance(solver, LocalSolver):
            raise ValueError(f"solver must be a fedlib.solvers.LocalSolver, got {type(solver).__name__}")
        check_own_step("solver", solver)
        if isinstance(params, (torch.nn.Module, torch.Tensor)):  # else "'Linear' object is not iterable"
            _parameter_list(params)
        self._initialising = True
        super().__init__(params, {"lr": solver.lr})
        self._initialising = False
        if len(self.param_groups) != 1:
            raise ValueError(f"params: one parameter group only (one solver for all parameters, as the a_i "
                             f"assume), got {len(self.param_groups)}")
        extra = sorted(set(self.param_groups[0]) - {"params", "lr", "param_names"})  # names: model.named_parameters()
        if extra:
            raise ValueError(f"params: the group sets {extra}; set momentum, mu and weight_decay on the LocalSolver")
        if self.param_groups[0]["lr"] != solver.lr:
            raise ValueError(f"params: the group's lr {self.param_groups[0]['lr']!r} differs from solver.lr "
                             f"{solver.lr!r}; set the learning rate on the solver")
        if len({id(p) for p in self._params}) != len(self._params):
            raise ValueError("params: a parameter is listed twice (a tied weight?); it would take every step twice "
                             "— list each parameter once, e.g. model.parameters()")
        for k, p in enumerate(self._params):
            if not p.is_floating_point():
                raise ValueError(f"params[{k}] is {p.dtype}: parameters must be floating point")
            if not p.requires_grad:  # else weight decay and prox would move a frozen parameter
                raise ValueError(f"params[{k}] does not require grad (frozen): pass the trainable parameters only, "
                                 "e.g. [p for p in model.parameters() if p.requires_grad], and the same list to "
                                 "parameters_of")
        self._base = solver
        self._own_step_checks = OwnStepChecks()  # begin's solvers: each distinct one probed once per optimizer
        self._solver: Optional[LocalSolver] = None
        self._state: Optional[SolverState] = None
        self._round_lr: Optional[float] = None  # the group's lr when the round began
        self._ended = False  # solver_state was read (client_final): the next step needs a begin first

    def __getstate__(self):
        raise TypeError("a ClientOptimizer cannot be copied or pickled (its state is one client's round): build one "
                        "per model, and checkpoint the server state between rounds")

    def add_param_group(self, param_group: dict) -> None:
        """Refused after construction: one solver, one parameter group.

        ``param_group`` is torch's dict of parameters and options; it is only taken while the constructor builds the
        one group (``ValueError`` afterwards)."""
        if not getattr(self, "_initialising", False):
            raise ValueError("ClientOptimizer has one parameter group; build another optimizer for other parameters")
        super().add_param_group(param_group)

    # ------------------------------------------------------------------ properties
    @property
    def _params(self) -> List[torch.Tensor]:
        return self.param_groups[0]["params"]

    @property
    def solver(self) -> LocalSolver:
        """The solver of the current round (the constructor's, with the group's ``lr`` at :meth:`begin`)."""
        return self._solver if self._solver is not None else self._base.with_lr(self.param_groups[0]["lr"])

    @property
    def lr(self) -> float:
        """The round's client learning rate :math:`\\eta` (what ``algorithm.apply`` takes)."""
        return float(self.solver.lr)

    @property
    def local_steps(self) -> int:
        """Steps taken since :meth:`begin`."""
        return 0 if self._state is None else int(self._state.step)

    @property
    def a_norm(self) -> float:
        """:math:`\\|a^{(k)}\\|_1` after the :math:`k` steps taken since :meth:`begin`."""
        return 0.0 if self._state is None else float(self._state.a_norm)

    @property
    def solver_state(self) -> SolverState:
        """The round's :class:`~fedlib.solvers.SolverState`, its ``params`` copies of the
        current parameters (for ``algorithm.client_final``). Reading it ends the client's round: it may be read
        again, but a :meth:`step` before the next :meth:`begin` is a ``RuntimeError`` (without that ``begin`` the
        next client would continue this one's iterate, step count and :math:`\\|a_i\\|_1`); watch a round in
        progress with :attr:`local_steps` and :attr:`a_norm`."""
        self._require_round()
        self._ended = True
        return self._state._replace(params=[p.detach().clone() for p in self._params])

    # ------------------------------------------------------------------ the round
    def begin(self, solver_state: SolverState, solver: Optional[LocalSolver] = None) -> None:
        """Start a client's round: copy ``solver_state.params`` (:math:`x^{(t,0)}`, a list of
        tensors like the parameters) into the parameters and reset the momentum buffer and
        the :math:`\\|a_i\\|_1` counter. ``solver`` replaces the round's solver (e.g. a client's
        own, Theorem 3); by default it is the constructor's with the group's current ``lr``, and ``solver_state``
        must then be a start that solver's ``init`` makes: one with a proximal anchor or a momentum buffer the
        solver does not keep, or without one it keeps (another algorithm's solver made it), is a ``ValueError``
        naming ``solver_state``, as the optimizer would run without (or with) that term. A given
        solver must have the group's ``lr`` as its base learning rate :math:`\\eta`, the unit of every
        client's :math:`\\|a_i\\|_1` (:func:`fedlib.solvers.check_shared_lr`; a client's own step size
        is a factor of it: ``LocalSolver(lr=eta, lr_schedule=lambda k: 3.0)``)."""
        if not isinstance(solver_state, SolverState):
            raise ValueError(f"solver_state must be a fedlib.solvers.SolverState (algorithm.client_init(server, i)), "
                             f"got {type(solver_state).__name__}")
        if solver_state.step != 0:
            raise ValueError(f"solver_state must be a round's start (step 0), got step {solver_state.step}")
        if solver is not None and not isinstance(solver, LocalSolver):
            raise ValueError(f"solver must be a fedlib.solvers.LocalSolver, got {type(solver).__name__}")
        group = self.param_groups[0]
        if solver is not None:  # ||a_i||_1 is counted in units of the solver's lr: one unit for all clients
            check_shared_lr("solver", [solver], lr=float(group["lr"]))
            self._own_step_checks.check("solver", solver)
        params = self._params
        _check_like(params, solver_state.params, "solver_state.params")
        live = {p.untyped_storage().data_ptr() for p in params if p.numel()}
        for k, v in enumerate(solver_state.params):
            if v.numel() and v.untyped_storage().data_ptr() in live:  # the server's x^(t,0) would train with the model
                raise ValueError(f"solver_state.params[{k}] shares memory with the model's parameters: the server "
                                 "state was built from the live parameters (model.parameters() or p.detach()), so "
                                 "training would overwrite x^(t,0) and every Delta_i; build it from copies, "
                                 "algo.init(parameters_of(model), m)")
        if solver_state.correction is not None:
            _check_like(params, solver_state.correction, "solver_state.correction")
        round_lr = float(group["lr"])
        own = solver is None  # the constructor's solver: solver_state must be one its init makes
        solver = solver if solver is not None else self._base.with_lr(round_lr)
        if solver_state.correction is not None and not solver.builtin_step:  # its update must add the correction
            self._own_step_checks.check("solver", solver, correction=True)
        start = [v.detach().clone() for v in solver_state.params]
        # a fresh state from the copied start: the anchor (prox) and the zero momentum
        # buffer never alias the caller's tensors or the live parameters
        state = solver.init(start, solver_state.correction)
        if own:
            _check_solver_made(solver_state, state, solver)
        self._round_lr = round_lr
        copy_into(params, start)
        self._solver = solver
        self._state = state._replace(params=[p.detach() for p in params])
        self._ended = False

    def _require_round(self) -> None:
        if self._state is None:
            raise RuntimeError("call begin(algorithm.client_init(server, client)) before the round's first step")

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], torch.Tensor]] = None):
        """One local step with the parameters' current gradients (``closure``, if given, is
        called first with gradients enabled and its loss returned, as in ``torch.optim``)."""
        self._require_round()
        if self._ended:
            raise RuntimeError(f"step: the round of {self._state.step} step(s) ended when solver_state was read "
                               "(algorithm.client_final); call begin(algorithm.client_init(server, i)) before the next "
                               "client's first step, else it would continue that round (its iterate, step count and "
                               "||a_i||_1); to watch a round in progress, read opt.local_steps and opt.a_norm")
        lr = float(self.param_groups[0]["lr"])
        if lr != self._round_lr:
            raise ValueError(f"lr: the learning rate changed within a round ({self._round_lr!r} -> {lr!r}); "
                             "a_i depends on every step size of the round: change it between rounds (before "
                             "begin), or give begin() a solver with a within-round schedule (decayed_sgd)")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self._params
        grads = []
        for k, p in enumerate(params):
            if not p.requires_grad:
                raise ValueError(f"params[{k}] was frozen (requires_grad=False) after the optimizer was built: weight "
                                 "decay and the proximal term would still move it; build the optimizer on the "
                                 "trainable parameters only")
            if p.grad is not None and p.grad.is_sparse:
                raise ValueError(f"params[{k}] has a sparse gradient: ClientOptimizer needs dense gradients")
            grads.append(torch.zeros_like(p) if p.grad is None else p.grad.detach())
        if self._solver.builtin_step:
            self._state = _step_in_place(self._solver, self._state, params, grads)
        else:  # a subclass with its own step (e.g. Nesterov): its update, out of place, copied in
            new = self._solver.update(self._state._replace(params=[p.detach().clone() for p in params]), grads)
            if not isinstance(new, SolverState):
                raise ValueError(f"solver.update: {type(self._solver).__name__}.update must return a SolverState, "
                                 f"got {type(new).__name__}")
            _check_like(params, new.params, f"{type(self._solver).__name__}.update(...).params")
            if new.step != self._state.step + 1:
                raise ValueError(f"{type(self._solver).__name__}.update must advance state.step by one "
                                 f"({self._state.step} -> {self._state.step + 1}), got {new.step!r}")
            copy_into(params, new.params)
            self._state = new._replace(params=[p.detach() for p in params])
        return loss

    # ------------------------------------------------------------------ not supported
    def state_dict(self):
        """Refused (``NotImplementedError``): the state is one client's round; checkpoint the server state."""
        raise NotImplementedError("ClientOptimizer's state is one client's round (fedlib.solvers.SolverState); "
                                  "checkpoint the server state between rounds instead")

    def load_state_dict(self, state_dict) -> None:
        """Refused (``NotImplementedError``): start each round with :meth:`begin` instead.

        ``state_dict`` is ignored."""
        raise NotImplementedError("ClientOptimizer's state is one client's round: start rounds with begin()")

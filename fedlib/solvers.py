r"""Local solvers: what a client runs for :math:`\tau_i` steps, and its vector :math:`a_i`.

Paper §4.1 and App. B: a client that starts from :math:`x^{(t,0)}` and takes
:math:`\tau_i` steps of a *linear* local solver ends with

.. math::

    \Delta_i = x_i^{(t,\tau_i)} - x^{(t,0)} = -\eta\, G_i a_i,
    \qquad G_i = [g_i(x^{(t,0)}), \dots, g_i(x^{(t,\tau_i-1)})],

where column :math:`j` of :math:`G_i` is the (stochastic) gradient taken at local step
:math:`j` and :math:`a_i \ge 0` depends only on the solver and :math:`\tau_i`.
Weight decay and variance-reduction corrections are *added to the gradient*, so they
are part of :math:`G_i`, not of :math:`a_i`.

One class, :class:`LocalSolver`, implements the step

.. math::

    \tilde g_k &= g_k + \lambda x_k + c_i
        \quad\text{(weight decay } \lambda\text{, VR correction } c_i\text{)}\\
    u_{k+1} &= \rho\, u_k + \tilde g_k \quad (u_0 = 0;\ \text{only if } \rho > 0)\\
    x_{k+1} &= x_k - \eta_k\bigl(u_{k+1} + \mu\,(x_k - x^{(t,0)})\bigr),

with :math:`\eta_k = \eta\, s_k` for a within-round step-size schedule :math:`s_k`.
The proximal term is added *outside* the momentum buffer — the official code meant
this but added it in place into the buffer (a known mistake). The factories
:func:`sgd`, :func:`decayed_sgd`, :func:`proximal_sgd`, :func:`momentum_sgd` and
:func:`momentum_proximal_sgd` choose the hyper-parameters.

Closed forms of :math:`a_i` (entry :math:`j = 0, \dots, \tau-1` weighs the gradient of
step :math:`j`; :math:`\alpha = \eta\mu`; :math:`n = \tau - 1 - j`):

=====================  ==============================================  ==========================================================
solver                 :math:`a_{i,j}`                                  :math:`\|a_i\|_1`
=====================  ==============================================  ==========================================================
SGD                    :math:`1`                                        :math:`\tau`
schedule :math:`s_j`   :math:`s_j`                                      :math:`\sum_j s_j`
proximal               :math:`(1-\alpha)^{n}`                           :math:`(1-(1-\alpha)^\tau)/\alpha`
momentum               :math:`(1-\rho^{n+1})/(1-\rho)`                  :math:`[\tau - \rho(1-\rho^\tau)/(1-\rho)]/(1-\rho)`
momentum + prox        :math:`\sum_{k=0}^{n}(1-\alpha)^{n-k}\rho^{k}`   :math:`\bigl[\tfrac{(1-\alpha)(1-(1-\alpha)^\tau)}{\alpha} - \tfrac{\rho(1-\rho^\tau)}{1-\rho}\bigr] / (1-\alpha-\rho)`
=====================  ==============================================  ==========================================================

*Momentum + prox, derived.* With :math:`y_k = x_k - x^{(t,0)}` and :math:`v_k = \eta u_k`,
the step is linear: :math:`v_{k+1} = \rho v_k + \eta g_k`,
:math:`y_{k+1} = (1-\alpha) y_k - \rho v_k - \eta g_k`. The response of :math:`y_\tau`
to :math:`g_j` is :math:`-\eta\, p_{\tau-1-j}` with :math:`p_0 = 1`,
:math:`p_{n+1} = (1-\alpha)p_n + \rho^{n+1}`, i.e.
:math:`p_n = \sum_{k=0}^{n}(1-\alpha)^{n-k}\rho^k
= \frac{(1-\alpha)^{n+1} - \rho^{n+1}}{1-\alpha-\rho}` (:math:`(n+1)\rho^n` when
:math:`1-\alpha=\rho`). It is *not* what running the momentum counter and then the
prox counter gives (the official code's vector).

*Online tracking.* Each solver also tracks :math:`\|a_i\|_1` while it runs: a scalar
"shadow" copy of the same step, driven by a unit gradient from :math:`0` with no weight
decay or correction, moves by :math:`-\eta\sum_j a^{(k)}_j` after :math:`k` steps; kept in
units of :math:`\eta` (:meth:`LocalSolver.counter_step`) it *is* :math:`\|a^{(k)}\|_1`. For
the factories above this is the running counter of the official code, done right for
momentum + prox.

Used by chapters 1, 4, 6 and 9 (chapter 1 plots these vectors), and through :mod:`fedlib.experiments`
by all the others.

Example
-------
>>> import numpy as np
>>> s = momentum_sgd(lr=0.1, momentum=0.5)
>>> np.round(s.a_vector(3), 4)
array([1.75, 1.5 , 1.  ])
>>> state = s.init(np.zeros(2))
>>> for _ in range(3):
...     state = s.update(state, np.ones(2))
>>> round(state.a_norm, 12), round(s.a_norm(3), 12)
(4.25, 4.25)
"""
from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from ._validate import _is_number, a_type, check_count, check_in_range, check_instance, check_nonnegative, check_positive, plain
from .tree import _promoted_dtype, tree_leaves, tree_map

__all__ = [
    "SolverState",
    "LocalSolver",
    "sgd",
    "decayed_sgd",
    "proximal_sgd",
    "momentum_sgd",
    "momentum_proximal_sgd",
    "make_solver",
    "SOLVERS",
    "check_shared_lr",
    "check_builtin_step",
    "check_own_step",
    "STEP_METHODS",
    "own_step_methods",
    "OWN_STEP_PROBES",
    "LINEARITY_PROBE",
    "OwnStepChecks",
]


class SolverState(NamedTuple):
    """State of one client's local run (or of a stack of clients in lock-step).

    ``params`` is :math:`x_k`; ``anchor`` is :math:`x^{(t,0)}` (kept only with a
    proximal term); ``momentum`` is :math:`u_k` (only with :math:`\\rho > 0`);
    ``correction`` the constant VR term :math:`c_i` (or ``None``); ``step`` is
    :math:`k`; ``shadow`` the scalar pair of the online counter
    (:meth:`LocalSolver.counter_step`) and ``a_norm`` the running :math:`\\|a^{(k)}\\|_1`.

    Example
    -------
    One SGD step with :math:`\\eta = 0.5` and gradient :math:`(1, 2)` from :math:`x_0 = 0`:
    :math:`x_1 = -0.5\\,(1, 2)`, one step taken, :math:`\\|a^{(1)}\\|_1 = 1`; plain SGD keeps no
    anchor and no momentum buffer:

    >>> import numpy as np
    >>> solver = sgd(lr=0.5)
    >>> state = solver.update(solver.init(np.zeros(2)), np.array([1.0, 2.0]))
    >>> state.params, state.step, state.a_norm, state.anchor, state.momentum
    (array([-0.5, -1. ]), 1, 1.0, None, None)
    """

    params: Any
    anchor: Any
    momentum: Any
    correction: Any
    step: int
    shadow: tuple
    a_norm: float


def _refuse_widening(x: Any, g: Any) -> None:
    """A gradient leaf whose dtype would change the parameter's in the step (float64 gradients on a float32 model:
    numpy and torch promote, and the model went on in float64 without a word) is a ``ValueError``; one that keeps it
    (float32 gradients on float64 parameters, a Python number) passes. An integer or bool gradient is taken as what
    the step makes of it, times a Python-float step size: numpy's float64, torch's default dtype. Only floating-point
    and complex parameters are held to their dtype (integer starting points become float as before). The promotion is
    :mod:`fedlib.tree`'s ``_promoted_dtype``, as for a server's update. A numpy number for a 0-d torch leaf passes
    (torch takes it as a Python number: the leaf keeps its dtype), and so does a gradient in the other byte order of
    numpy parameters ('>f8' read from a file, '<f8' gradients: the model stays float64, in native order)."""
    xd, gd = getattr(x, "dtype", None), getattr(g, "dtype", None)
    if xd is None or gd is None or xd == gd:
        return
    torch = sys.modules.get("torch")  # a torch dtype means torch is imported
    if torch is not None and isinstance(xd, torch.dtype):
        held = xd.is_floating_point or xd.is_complex
        integral = isinstance(gd, torch.dtype) and not (gd.is_floating_point or gd.is_complex)
        step = torch.get_default_dtype() if integral else gd  # an integer gradient times the Python-float step size
    else:
        held = isinstance(xd, np.dtype) and xd.kind in "fc"
        step = np.dtype(np.float64) if isinstance(gd, np.dtype) and gd.kind in "biu" else gd
    to = _promoted_dtype(xd, step) if held else None  # None: mixed kinds, left to the step's own checks
    if to is not None and to != xd and not (isinstance(xd, np.dtype) and to == xd.newbyteorder("=")):
        # to is in native order: '>f8' parameters with '<f8' gradients stay float64
        raise ValueError(f"grads: a leaf is {gd} but the parameter is {xd}: the step would turn the model into "
                         f"{to}; return gradients in the parameters' dtype")


def _default_name(solver: "LocalSolver") -> str:
    """:class:`LocalSolver`'s ``name`` when none is given: the factory's name for its fields, or the class name of a
    subclass with its own step."""
    if not solver.builtin_step:
        return type(solver).__name__
    if solver.momentum > 0:
        return "momentum-prox" if solver.mu > 0 else "momentum"
    if solver.mu > 0:
        return "prox"
    return "sgd" if solver.lr_schedule is None else "decayed-sgd"


@dataclasses.dataclass(frozen=True)
class LocalSolver:
    r"""A linear local solver (see the module docstring for the step and its :math:`a_i`).

    Parameters
    ----------
    lr
        Reference client learning rate :math:`\eta > 0`.
    momentum
        Heavy-ball factor :math:`\rho \in [0, 1)`; the buffer starts at 0 every round.
    mu
        Proximal coefficient :math:`\mu \ge 0`; requires :math:`\eta_k \mu \le 1`.
    weight_decay
        Weight decay :math:`\lambda \ge 0`, added to the gradient (not part of :math:`a_i`).
    lr_schedule
        ``None`` (constant step :math:`\eta`) or a callable ``k -> s_k > 0``: within-round step size
        :math:`\eta_k = \eta s_k`.
    name
        Label used in results and figures. Default (``None``): the factory name its fields describe, ``"sgd"``,
        ``"momentum"``, ``"prox"``, ``"momentum-prox"``, or ``"decayed-sgd"`` (an ``lr_schedule`` without momentum
        or prox); a subclass with its own step (:attr:`builtin_step` false): its class name.

    Example
    -------
    Momentum :math:`\rho = 0.5` for :math:`\tau = 3` steps: the gradient of step :math:`j` is
    carried to the end by :math:`1 + \rho + \dots + \rho^{\tau-1-j}`, so
    :math:`a = (1 + 0.5 + 0.25,\ 1 + 0.5,\ 1) = (1.75, 1.5, 1)` and
    :math:`\|a\|_1 = 4.25` (the table's :math:`[3 - 0.5(1 - 0.125)/0.5]/0.5 = 4.25`). Three
    :meth:`update` calls with a unit gradient move :math:`x` by :math:`-\eta\|a\|_1`:

    >>> import numpy as np
    >>> solver = LocalSolver(lr=0.1, momentum=0.5, name="momentum")
    >>> solver.a_vector(3).tolist(), solver.a_norm(3)
    ([1.75, 1.5, 1.0], 4.25)
    >>> final = solver.run(np.zeros(1), lambda x, k: np.ones(1), local_steps=3)
    >>> np.round(final.params, 12), final.a_norm
    (array([-0.425]), 4.25)
    """

    lr: float
    momentum: float = 0.0
    mu: float = 0.0
    weight_decay: float = 0.0
    lr_schedule: Optional[Callable[[int], float]] = None
    name: Optional[str] = None

    def __post_init__(self):
        # stored as Python floats: a numpy float64 (np.logspace's lr, say) turned a float32 numpy model's step, and so
        # its Delta_i and the global model, into float64 without a word (NumPy 2 keeps a numpy scalar's dtype)
        object.__setattr__(self, "lr", check_positive("lr", self.lr))
        object.__setattr__(self, "momentum", check_in_range("momentum", self.momentum, 0.0, 1.0))
        object.__setattr__(self, "mu", check_nonnegative("mu", self.mu))
        object.__setattr__(self, "weight_decay", check_nonnegative("weight_decay", self.weight_decay))
        if self.lr_schedule is not None and not callable(self.lr_schedule):
            raise ValueError(f"lr_schedule must be callable k -> factor, got {self.lr_schedule!r}")
        if self.lr_schedule is None and self.lr * self.mu > 1.0 + 1e-12:
            raise ValueError(f"mu: lr*mu must be <= 1 for a proximal step, got lr*mu = {self.lr * self.mu!r}")
        # named from the checked fields (was "sgd" whatever the fields); named before the checks, momentum="0.9" or
        # None failed as a TypeError ('>' between str and int), not the ValueError naming momentum
        if self.name is None:
            object.__setattr__(self, "name", _default_name(self))

    # ------------------------------------------------------------------ helpers
    @property
    def alpha(self) -> float:
        r""":math:`\alpha = \eta\mu`."""
        return self.lr * self.mu

    @property
    def builtin_step(self) -> bool:
        r"""``True`` when the solver takes :class:`LocalSolver`'s own step: its class overrides none of
        :data:`STEP_METHODS` (:meth:`init`, :meth:`update`, :meth:`counter_step`, the leaf step
        ``_direction_and_params`` and :meth:`step_size`, :func:`own_step_methods`; a step size that changes within the
        round is ``lr_schedule``). Engines that fuse that step
        into their own kernels — :func:`fedlib.engines.batched.run_batched` with ``fast=True``, the
        stacked and grouped engines, :func:`fedlib.engines.quadratic.run_replicas` — need it
        (:func:`check_builtin_step`); the per-client loop
        :func:`fedlib.engines.reference.run_sequential`, ``run_batched(fast=False)`` and
        :class:`fedlib.optim.ClientOptimizer` call a subclass's own ``update``."""
        return not own_step_methods(type(self))

    def with_lr(self, lr: float) -> "LocalSolver":
        r"""The same solver with another reference learning rate (e.g. a decayed one).

        ``lr`` is the new :math:`\eta`, checked as the constructor checks it (finite, > 0, and :math:`\eta\mu \le 1`
        for a proximal solver without ``lr_schedule``)."""
        return dataclasses.replace(self, lr=lr)

    def step_size(self, k: int) -> float:
        r""":math:`\eta_k = \eta\, s_k` of local step ``k``."""
        if self.lr_schedule is None:
            return self.lr
        s = float(self.lr_schedule(k))
        if s == 0 and isinstance(self.lr_schedule, _ExponentialDecay):  # the schedule is right, float64 is not
            raise ValueError(f"decayed_sgd: the step size factor gamma**k = {self.lr_schedule.gamma!r}**{k} "
                             "underflows float64 to 0 at this local step: take fewer local steps or a gamma closer "
                             "to 1")
        if not np.isfinite(s) or s <= 0:
            raise ValueError(f"lr_schedule({k}) must be a finite factor > 0, got {s!r}")
        if self.lr * s * self.mu > 1.0 + 1e-12:
            raise ValueError(f"mu: lr*factor*mu must be <= 1 at step {k}, got {self.lr * s * self.mu!r}")
        return self.lr * s

    # ------------------------------------------------------------ the algorithm
    def init(self, params: Any, correction: Any = None) -> SolverState:
        """Start a round at ``params`` = :math:`x^{(t,0)}` (optionally with a VR correction)."""
        if correction is not None:
            try:
                same = all(np.shape(c) == np.shape(x) for x, c in zip(tree_leaves(params), tree_leaves(correction)))
                tree_map(lambda x, c: None, params, correction)
            except ValueError:
                same = False
            if not same:
                raise ValueError("correction must be a tree with the structure and leaf shapes of params")
        anchor = params if self.mu > 0 else None
        momentum = tree_map(lambda x: x * 0, params) if self.momentum > 0 else None
        return SolverState(params, anchor, momentum, correction, 0, (0.0, 0.0), 0.0)

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        """One step on leaves; returns (new_x, new_u)."""
        if wd:
            g = g + wd * x
        if corr is not None:
            g = g + corr
        if self.momentum > 0:
            u = self.momentum * u + g
            direction = u
        else:
            direction = g
        if self.mu > 0:
            direction = direction + self.mu * (x - x0)  # new object: never into the buffer
        return x - lr_k * direction, u

    def update(self, state: SolverState, grads: Any) -> SolverState:
        r"""Take one local step with the gradient ``grads`` (a tree like ``params``).

        ``state`` is the :class:`SolverState` of :meth:`init` or of the previous ``update``; the new state has ``step``
        advanced by one and ``a_norm`` the :math:`\|a_i\|_1` after that many steps. Weight decay and
        ``state.correction`` are added to ``grads``. Gradients of another structure, leaf shape or array kind (numpy vs
        torch) than ``params`` are a ``ValueError``, and so are floating-point (or complex) parameters' gradients of a
        dtype that would widen them (float64 gradients on a float32 model); float32 gradients on float64 parameters
        are taken."""
        k = state.step
        lr_k = self.step_size(k)
        wd = self.weight_decay
        mom = state.momentum
        anchor = state.anchor
        corr = state.correction
        x = state.params
        if (type(x) is np.ndarray and type(grads) is np.ndarray and (mom is None or type(mom) is np.ndarray)
                and (anchor is None or type(anchor) is np.ndarray) and (corr is None or type(corr) is np.ndarray)):
            # params a single numpy array (the quadratic chapters: a million steps of d = 20): the step of
            # `leaf` below without tree_map; for plain arrays its checks reduce to the shape (the same error)
            if grads.shape != x.shape:
                raise ValueError(f"grads: a leaf has shape {grads.shape} but the parameter has {x.shape}")
            if grads.dtype is not x.dtype:
                _refuse_widening(x, grads)
            nx, nu = self._direction_and_params(x, grads, mom, anchor, corr, lr_k, wd)
            counter = self.counter_step(k, state.shadow)
            return SolverState(nx, anchor, nu if mom is not None else None, corr, k + 1, counter, counter[0])

        new_u_leaves = []

        def leaf(x, g, *rest):
            if isinstance(g, (dict, list, tuple)):  # tree_map pairs a params leaf with a whole container
                raise ValueError(f"grads must have the structure of params: {a_type(g)} where params has "
                                 f"a leaf of shape {tuple(np.shape(x))} (return an array/tensor like params)")
            if hasattr(g, "add_") != hasattr(x, "add_") and np.ndim(g) > 0:  # numpy/torch mixed: a deep TypeError
                kinds = {True: "a torch tensor", False: "a numpy array"}  # or a model silently turned float64
                raise ValueError(f"grads: a leaf is {kinds[hasattr(g, 'add_')]} but the parameter is "
                                 f"{kinds[hasattr(x, 'add_')]} (return gradients of the parameters' kind)")
            if np.shape(g) != np.shape(x):  # numpy/torch would broadcast e.g. (d, 1) onto (d,) silently
                raise ValueError(f"grads: a leaf has shape {tuple(np.shape(g))} but the parameter has {tuple(np.shape(x))}")
            if getattr(g, "dtype", None) is not getattr(x, "dtype", None):
                _refuse_widening(x, g)
            it = iter(rest)
            u = next(it) if mom is not None else None
            x0 = next(it) if anchor is not None else None
            c = next(it) if corr is not None else None
            nx, nu = self._direction_and_params(x, g, u, x0, c, lr_k, wd)
            new_u_leaves.append(nu)
            return nx

        extra = [t for t in (mom, anchor, corr) if t is not None]
        try:
            new_params = tree_map(leaf, state.params, grads, *extra)
        except ValueError as exc:
            if str(exc).startswith("tree structures differ"):
                raise ValueError(f"grads (or correction) must have the structure of params: {exc}") from None
            raise
        if mom is not None:
            it = iter(new_u_leaves)
            new_mom = tree_map(lambda _: next(it), mom)
        else:
            new_mom = None
        counter = self.counter_step(k, state.shadow)
        return SolverState(new_params, anchor, new_mom, corr, k + 1, counter, counter[0])

    def counter_step(self, k: int, counter: tuple) -> tuple:
        r"""One step of the online counter :math:`(A_k, \hat u_k)` with :math:`A_k = \|a^{(k)}\|_1`.

        It is the solver's own step applied to a scalar that starts at 0 with unit
        gradient, written in units of :math:`\eta` (so it is exact for SGD, as the
        official code's counters are): :math:`\hat u_{k+1} = \rho\hat u_k + 1`,
        :math:`A_{k+1} = (1 - \eta_k\mu) A_k + s_k \hat u_{k+1}`, :math:`s_k = \eta_k/\eta`.
        """
        a, u = counter
        lr_k = self.step_size(k)
        u = self.momentum * u + 1.0 if self.momentum > 0 else 1.0
        return ((1.0 - lr_k * self.mu) * a + (lr_k / self.lr) * u, u) if self.mu > 0 else (a + (lr_k / self.lr) * u, u)

    def online_a_norms(self, steps: int) -> np.ndarray:
        r"""The online counter after ``k = 1..steps`` local steps (entry ``k-1``): what a
        client that stops after ``k`` steps reports as :math:`\|a_i\|_1`. The same for
        every client at the same step, so batched engines compute it once per round. ``steps`` is a whole
        number :math:`\ge 0`."""
        steps = check_count("steps", steps, minimum=0)
        out = np.empty(steps)
        counter = (0.0, 0.0)
        for k in range(steps):
            counter = self.counter_step(k, counter)
            out[k] = counter[0]
        return out

    def run(self, params: Any, grad_fn: Callable[[Any, int], Any], local_steps: int, correction: Any = None):
        r"""Run ``local_steps`` steps with ``grad_fn(params, k)``; return the final state.

        ``params`` is :math:`x^{(t,0)}`, ``grad_fn(params, k)`` the gradient at step ``k`` (from 0), ``local_steps``
        the :math:`\tau_i` (a whole number :math:`\ge 1`), and ``correction`` a VR correction :math:`\bar c - c_i`
        added to every gradient (``None``: none; else a tree with the structure and leaf shapes of ``params``, as
        :meth:`init` checks)."""
        local_steps = check_count("local_steps", local_steps, minimum=1)
        state = self.init(params, correction)
        for k in range(local_steps):
            state = self.update(state, grad_fn(state.params, k))
        return state

    # ------------------------------------------------------------ closed forms
    def a_vector(self, tau: int) -> np.ndarray:
        r"""Closed-form :math:`a_i` for ``tau`` local steps (a whole number :math:`\ge 1`; length ``tau``, float64).

        With a within-round schedule combined with momentum or prox there is no
        simple closed form; then the vector is the exact impulse response of the
        linear recursion :math:`(y, v)` above, all :math:`\tau` entries from one backward pass
        (:math:`O(\tau)`, each :meth:`step_size` taken once, in the order of the steps). A subclass with its own step
        (:attr:`builtin_step` false) that does not override this method gets the :math:`a_i` of
        its own step (``tau`` steps of its ``update`` on unit gradients :math:`e_k`, as
        :func:`check_own_step` probes it), not the formula of the built-in step.
        """
        tau = check_count("tau", tau, minimum=1)
        if not self.builtin_step and type(self).a_vector is LocalSolver.a_vector:
            return self._stepped_a_vector(tau)
        n = np.arange(tau - 1, -1, -1, dtype=np.float64)  # n = tau-1-j
        rho, alpha = self.momentum, self.alpha
        if self.lr_schedule is not None:
            eta = np.array([self.step_size(k) for k in range(tau)])  # k = 0, 1, ...: the first bad step raises
            if rho == 0 and self.mu == 0:
                return eta / self.lr
            return self._impulse_response(eta)
        if rho == 0 and alpha == 0:
            return np.ones(tau)
        if rho == 0:
            return _one_minus_alpha_pow(alpha, n)
        if alpha == 0:  # 1 - rho^(n+1) by expm1: the plain difference cancels for rho near 1
            return -np.expm1((n + 1) * math.log(rho)) / (1.0 - rho)
        return _momentum_prox_a_vector(rho, alpha, n)

    def a_norm(self, tau: int) -> float:
        r"""Closed-form :math:`\|a_i\|_1` for ``tau`` local steps (a whole number :math:`\ge 1`; table in the module
        doc).

        A subclass with its own step (:attr:`builtin_step` false) that does not override this
        method gets its own online counter after ``tau`` steps (:meth:`online_a_norms`, what its
        clients report), not the formula of the built-in step."""
        tau = check_count("tau", tau, minimum=1)
        if not self.builtin_step and type(self).a_norm is LocalSolver.a_norm:
            return float(self.online_a_norms(tau)[-1])
        rho, alpha = self.momentum, self.alpha
        if self.lr_schedule is not None:
            return float(np.sum(self.a_vector(tau)))
        if rho == 0 and alpha == 0:
            return float(tau)
        if rho == 0:
            return _one_minus_pow(alpha, tau) / alpha
        # 1 - rho^tau by expm1: the plain difference loses ~|log10(1 - rho)| digits (momentum + prox
        # was 1.4e-8 relative off at rho = 1 - 1e-9, alpha = 0.05, tau = 5)
        mom_sum = rho * -math.expm1(tau * math.log(rho)) / (1.0 - rho)
        if alpha == 0:
            if (1.0 - rho) * tau < 1.0:  # tau - mom_sum cancels (rho near 1: 33 % off at rho = 1 - 1e-9, tau = 2)
                return float(np.sum(self.a_vector(tau)))
            return (tau - mom_sum) / (1.0 - rho)
        q = 1.0 - alpha
        if abs(q - rho) < 1e-2 or tau <= _SUMMED_A_NORM_STEPS:
            # the closed form below subtracts two sums: it cancels where q ~ rho and, by up to 1e-14 relative, at a
            # few steps (tau = 1 gave 1 + 1.1e-14 at rho = 0.98, alpha = 1e-9); the exact vector's sum does not
            return float(np.sum(self.a_vector(tau)))
        # beyond: the exact q - rho = 1 - alpha - rho rounded once, not the rounded q's (2.5e-15 relative, not 5.5e-15)
        return (q * _one_minus_pow(alpha, tau) / alpha - mom_sum) / math.fsum((1.0, -alpha, -rho))

    def _stepped_a_vector(self, tau: int) -> np.ndarray:
        """:math:`a_i` of the solver's own ``update``: ``tau`` steps on a ``tau``-vector from 0 with
        gradient :math:`e_k` at step ``k`` (weight decay off) move it by :math:`-\\eta a_i`."""
        probe = dataclasses.replace(self, weight_decay=0.0)
        state = probe.init(np.zeros(tau))
        for k in range(tau):  # a fresh e_k per step, not rows of np.eye(tau): O(tau) memory, not O(tau^2)
            e = np.zeros(tau)
            e[k] = 1.0
            state = probe.update(state, e)
        return -np.asarray(state.params, dtype=np.float64) / probe.lr

    def _impulse_response(self, eta: np.ndarray) -> np.ndarray:
        r""":math:`a_j` of the built-in step with step sizes ``eta`` (:math:`\eta_k`, one per local step), exact, in
        :math:`O(\tau)`.

        On a scalar from 0 with no weight decay or correction the step is
        :math:`u_{k+1} = \rho u_k + g_k`, :math:`y_{k+1} = q_k y_k - \eta_k u_{k+1}` with :math:`q_k = 1 - \eta_k\mu`
        (:math:`u_{k+1} = g_k` when :math:`\rho = 0`), so

        .. math::

            y_\tau = -\sum_{k=0}^{\tau-1} P_k\,\eta_k u_{k+1}, \quad
            P_k = \prod_{m=k+1}^{\tau-1} q_m, \qquad
            a_j = \frac{1}{\eta}\sum_{k=j}^{\tau-1} P_k\,\eta_k\,\rho^{k-j}.

        The adjoint pass runs backwards: :math:`P_{\tau-1} = 1`, :math:`P_{k-1} = q_k P_k`, and
        :math:`b_\tau = 0`, :math:`b_j = P_j\eta_j + \rho\, b_{j+1}`, :math:`a_j = b_j/\eta` (:math:`P_k = \partial y_\tau/\partial y_{k+1}`,
        :math:`b_j = -\partial y_\tau/\partial g_j`). It replaces
        :math:`\tau` forward runs of :math:`\tau` steps each (:math:`O(\tau^2)`, 1.0 s at :math:`\tau = 10^3`)."""
        rho, mu = self.momentum, self.mu
        tau = len(eta)
        b = np.empty(tau)
        p, acc = 1.0, 0.0
        for k in range(tau - 1, -1, -1):
            acc = p * eta[k] + rho * acc
            b[k] = acc
            p *= 1.0 - eta[k] * mu
        return b / self.lr


#: Momentum + prox: up to this many local steps :meth:`LocalSolver.a_norm` sums the exact :math:`a_i` (pairwise, a
#: few units of rounding; at most 65,536 ``expm1``, about a millisecond) rather than evaluate the closed form, whose
#: difference of two sums loses up to about 1e-14 relative at a few steps (measured against
#: mpmath on 3,000 random (rho, alpha, tau): 4.0e-16 at most up to this many steps; beyond, the closed form divided by
#: 1 - alpha - rho rounded once: 2.5e-15 at most on 3,000 random draws, where the rounded q - rho gave 5.5e-15).
_SUMMED_A_NORM_STEPS = 2 ** 16


def _one_minus_alpha_pow(alpha: float, n: np.ndarray) -> np.ndarray:
    r""":math:`(1-\alpha)^n` for the exact :math:`1 - \alpha`: ``(1.0 - alpha) ** n`` raises the rounded
    :math:`q = 1 - \alpha` (off by up to 1.1e-16), whose error grows to :math:`n \cdot 10^{-16}` relative (2.2e-11 at
    :math:`\alpha = 10^{-12}`, :math:`n = 10^6`); the rounding :math:`e = (1 - \alpha) - q`, exact by Sterbenz, is put
    back as the factor :math:`(1 + e/q)^n`. Where :math:`q` is exact (:math:`\alpha \ge 1/2`, or an :math:`\alpha`
    such as :math:`2^{-j}`, :math:`j \le 53`, whose :math:`1 - \alpha` fits in 53 bits; not :math:`2^{-60}`) this is
    ``q ** n`` itself."""
    q = 1.0 - alpha
    e = (1.0 - q) - alpha
    if e == 0.0:
        return q ** n
    return q ** n * np.exp(n * math.log1p(e / q))


def _momentum_prox_a_vector(rho: float, alpha: float, n: np.ndarray) -> np.ndarray:
    r"""Momentum + prox's :math:`p_n = \sum_{k=0}^{n} q^{n-k}\rho^k`, :math:`q = 1 - \alpha`, for whole
    :math:`n \ge 0` (an array), :math:`0 < \rho < 1`, :math:`0 < \alpha \le 1`, to a few units of rounding
    whatever :math:`n` and however close :math:`q` and :math:`\rho` are.

    With :math:`b = \max(q, \rho)`, :math:`s = \min(q, \rho)` and :math:`L = \log(s/b) \le 0`,
    :math:`p_n = b^n \sum_{k=0}^{n} e^{kL} = b^n\,\mathrm{expm1}((n+1)L)/\mathrm{expm1}(L)` (:math:`(n+1)b^n` when
    :math:`L = 0`). :math:`L = \mathrm{log1p}(-|q - \rho|/b)`, with :math:`q - \rho = 1 - \alpha - \rho` rounded
    once (``math.fsum``), carries a relative error of a few units of rounding, which the ratio amplifies by at most
    about one; :math:`b^n` is :func:`_one_minus_alpha_pow` or ``rho ** n``. The ratio form
    :math:`(q^{n+1} - \rho^{n+1})/(q - \rho)` and the recursion :math:`p_{n+1} = q p_n + \rho^{n+1}` used before
    raised the rounded :math:`q` to the :math:`n`-th power (their error grew as :math:`n \cdot 10^{-16}`: 2.2e-13
    relative at :math:`\rho = 0.9`, :math:`\alpha = 0.05`, :math:`\tau = 5000`)."""
    q = 1.0 - alpha
    q_minus_rho = math.fsum((1.0, -alpha, -rho))
    big_pow, big = (_one_minus_alpha_pow(alpha, n), q) if q_minus_rho >= 0 else (rho ** n, rho)
    ratio = abs(q_minus_rho) / big  # 1 - s/b, in [0, 1]
    if ratio == 0.0:
        return (n + 1) * big_pow
    if ratio >= 1.0:  # s/b = 0 (alpha = 1: q = 0, only rho^n) or below the rounding of b (rho ~ 1e-300): b^n
        return big_pow
    log_ratio = math.log1p(-ratio)
    out = big_pow * (np.expm1((n + 1) * log_ratio) / math.expm1(log_ratio))
    out[n == 0] = 1.0  # p_0 = 1 exactly (numpy's and math's expm1 may differ in the last bit)
    return out


def _one_minus_pow(alpha: float, tau: int) -> float:
    r""":math:`1 - (1-\alpha)^\tau` without cancellation for small :math:`\alpha` (FedProx's
    :math:`\alpha = \eta\mu` is often ~1e-5, where the plain formula loses ~6 digits)."""
    if alpha >= 1.0:
        return 1.0
    return -math.expm1(tau * math.log1p(-alpha))


# ---------------------------------------------------------------- factories
def sgd(lr: float, weight_decay: float = 0.0) -> LocalSolver:
    r"""Plain local SGD: :math:`x_{k+1} = x_k - \eta g_k`; :math:`a_i = [1, \dots, 1]`,
    :math:`\|a_i\|_1 = \tau_i` (paper eq. 6, FedAvg).

    ``lr`` is :math:`\eta > 0`; ``weight_decay`` is :math:`\lambda \ge 0`, added to the gradient (default 0: none).

    Example
    -------
    Every gradient counts once: :math:`a = (1, 1, 1)`, :math:`\|a\|_1 = \tau = 3`.

    >>> sgd(lr=0.1).a_vector(3).tolist(), sgd(lr=0.1).a_norm(3)
    ([1.0, 1.0, 1.0], 3.0)
    """
    return LocalSolver(lr=lr, weight_decay=weight_decay, name="sgd")


def decayed_sgd(lr: float, gamma: Optional[float] = None, schedule: Optional[Callable[[int], float]] = None,
                weight_decay: float = 0.0) -> LocalSolver:
    r"""SGD with a step size that changes within the round, :math:`\eta_k = \eta s_k`.

    ``gamma`` gives the paper's exponential decay :math:`s_k = \gamma^k` (§4.1:
    :math:`a_i = [1, \gamma, \dots, \gamma^{\tau_i-1}]`,
    :math:`\|a_i\|_1 = (1-\gamma^{\tau_i})/(1-\gamma)`), :math:`0 < \gamma \le 1` (a step size
    that grows within the round goes through ``schedule``); ``schedule`` any ``k -> s_k > 0``.

    ``lr`` is the reference :math:`\eta > 0`; ``weight_decay`` is :math:`\lambda \ge 0`, added to the gradient (default
    0: none). Giving both or neither of ``gamma`` and ``schedule`` is a ``ValueError``.

    Example
    -------
    :math:`\gamma = 1/2`, :math:`\tau = 3`: :math:`a = (1, 1/2, 1/4)` and
    :math:`\|a\|_1 = (1 - 1/8)/(1 - 1/2) = 7/4`:

    >>> solver = decayed_sgd(lr=0.1, gamma=0.5)
    >>> solver.a_vector(3).tolist(), solver.a_norm(3)
    ([1.0, 0.5, 0.25], 1.75)
    """
    if (gamma is None) == (schedule is None):
        raise ValueError("decayed_sgd: give exactly one of gamma or schedule")
    if gamma is not None:
        if _is_number(gamma) and gamma > 1:
            raise ValueError(f"gamma must lie in (0, 1] (a decay), got {gamma!r}; for a step size that grows "
                             "within the round pass schedule=lambda k: gamma ** k")
        g = check_positive("gamma", gamma)
        schedule = _ExponentialDecay(g)
    return LocalSolver(lr=lr, weight_decay=weight_decay, lr_schedule=schedule, name="decayed-sgd")


@dataclasses.dataclass(frozen=True)
class _ExponentialDecay:
    gamma: float

    def __call__(self, k: int) -> float:
        return self.gamma ** k


def proximal_sgd(lr: float, mu: float, weight_decay: float = 0.0) -> LocalSolver:
    r"""FedProx's local solver: :math:`x_{k+1} = x_k - \eta(g_k + \mu(x_k - x^{(t,0)}))`.

    :math:`a_i = [(1-\alpha)^{\tau_i-1}, \dots, (1-\alpha), 1]`,
    :math:`\|a_i\|_1 = (1-(1-\alpha)^{\tau_i})/\alpha`, :math:`\alpha = \eta\mu` (paper eq. 7, App. B.1).

    ``lr`` is :math:`\eta > 0` and ``mu`` is :math:`\mu \ge 0` with :math:`\eta\mu \le 1`; ``weight_decay`` is
    :math:`\lambda \ge 0`, added to the gradient (default 0: none).

    Example
    -------
    :math:`\eta = 0.5`, :math:`\mu = 1`, so :math:`\alpha = 1/2`; for :math:`\tau = 3` the early
    gradients are shrunk by the pull back to :math:`x^{(t,0)}`:
    :math:`a = (1/4, 1/2, 1)`, :math:`\|a\|_1 = (1 - 1/8)/(1/2) = 7/4` (fewer than 3 steps' worth):

    >>> solver = proximal_sgd(lr=0.5, mu=1.0)
    >>> solver.a_vector(3).tolist(), solver.a_norm(3)
    ([0.25, 0.5, 1.0], 1.75)
    """
    check_nonnegative("mu", mu)
    return LocalSolver(lr=lr, mu=mu, weight_decay=weight_decay, name="prox")


def momentum_sgd(lr: float, momentum: float = 0.9, weight_decay: float = 0.0) -> LocalSolver:
    r"""Heavy-ball local SGD, buffer reset each round: :math:`u_{k+1} = \rho u_k + g_k`,
    :math:`x_{k+1} = x_k - \eta u_{k+1}`.

    :math:`a_i = [1-\rho^{\tau_i}, \dots, 1-\rho]/(1-\rho)`,
    :math:`\|a_i\|_1 = [\tau_i - \rho(1-\rho^{\tau_i})/(1-\rho)]/(1-\rho)` (paper §4.1, App. B.2).

    ``lr`` is :math:`\eta > 0`, ``momentum`` is :math:`\rho \in [0, 1)` (default 0.9); ``weight_decay`` is
    :math:`\lambda \ge 0`, added to the gradient before the buffer (default 0: none).

    Example
    -------
    :math:`\rho = 1/2`, :math:`\tau = 3`: :math:`a = (1 - 1/8,\ 1 - 1/4,\ 1 - 1/2)/(1/2) = (1.75, 1.5, 1)`,
    :math:`\|a\|_1 = 1 + 1.5 + 1.75 = 4.25` (momentum makes 3 steps count as 4.25):

    >>> solver = momentum_sgd(lr=0.1, momentum=0.5)
    >>> solver.a_vector(3).tolist(), solver.a_norm(3)
    ([1.75, 1.5, 1.0], 4.25)
    """
    return LocalSolver(lr=lr, momentum=momentum, weight_decay=weight_decay, name="momentum")


def momentum_proximal_sgd(lr: float, momentum: float = 0.9, mu: float = 0.0, weight_decay: float = 0.0) -> LocalSolver:
    r"""Heavy-ball SGD with a proximal term outside the buffer:
    :math:`u_{k+1} = \rho u_k + g_k`, :math:`x_{k+1} = x_k - \eta(u_{k+1} + \mu(x_k - x^{(t,0)}))`.

    :math:`a_{i,j} = \frac{(1-\alpha)^{n+1} - \rho^{n+1}}{1-\alpha-\rho}`, :math:`n = \tau_i-1-j`
    (derived in the module docstring; not the official code's counter).

    ``lr`` is :math:`\eta > 0`, ``momentum`` is :math:`\rho \in [0, 1)` (default 0.9), ``mu`` is :math:`\mu \ge 0` with
    :math:`\eta\mu \le 1` (default 0: plain heavy ball); ``weight_decay`` is :math:`\lambda \ge 0`, added to the
    gradient (default 0: none).

    Example
    -------
    :math:`\rho = 1/4`, :math:`\eta = 0.5`, :math:`\mu = 1` (:math:`\alpha = 1/2`), :math:`\tau = 3`. By the
    recursion :math:`p_0 = 1`, :math:`p_{n+1} = (1-\alpha) p_n + \rho^{n+1}`:
    :math:`p_1 = 1/2 + 1/4 = 3/4`, :math:`p_2 = 3/8 + 1/16 = 7/16`, so :math:`a = (7/16, 3/4, 1)`
    and :math:`\|a\|_1 = 35/16`:

    >>> solver = momentum_proximal_sgd(lr=0.5, momentum=0.25, mu=1.0)
    >>> solver.a_vector(3).tolist(), solver.a_norm(3)
    ([0.4375, 0.75, 1.0], 2.1875)
    """
    return LocalSolver(lr=lr, momentum=momentum, mu=mu, weight_decay=weight_decay, name="momentum-prox")


#: The solver names :func:`make_solver` takes (the command line's ``--solver``).
SOLVERS = ("sgd", "prox", "momentum", "momentum-prox")


def make_solver(name: str, lr: float, *, momentum: Optional[float] = None, mu: float = 0.0,
                weight_decay: float = 0.0) -> LocalSolver:
    r"""Build a solver by name: ``"sgd"``, ``"prox"``, ``"momentum"`` or ``"momentum-prox"`` (:data:`SOLVERS`;
    the factories above, with their :math:`a_i` from paper §4.1 and App. B).

    ``momentum`` (:math:`\rho`, default 0.9) is for the momentum solvers only and ``mu`` (:math:`\mu`) for the
    proximal ones: either given to a solver without it is refused (``ValueError`` naming it), never dropped.

    ``lr`` is :math:`\eta > 0` and ``weight_decay`` :math:`\lambda \ge 0` (default 0), for every solver; both are
    checked by :class:`LocalSolver`. An unknown ``name`` is a ``ValueError`` that lists :data:`SOLVERS` and calls the
    choice ``solver``, as the CLI's flag ``--solver`` does: ``solver must be one of [...], got 'adam'``.

    Example
    -------
    ``"prox"`` is :func:`proximal_sgd` and needs :math:`\mu > 0` (with :math:`\mu = 0` it would be plain SGD), as
    ``"momentum-prox"`` does (it would be plain momentum):

    >>> make_solver("prox", 0.5, mu=1.0) == proximal_sgd(0.5, 1.0)
    True
    >>> make_solver("prox", 0.5)
    Traceback (most recent call last):
    ...
    ValueError: mu must be > 0 for the proximal solver, got 0.0

    A proximal term asked of plain momentum would have been dropped; it is refused:

    >>> make_solver("momentum", 0.5, mu=1.0)
    Traceback (most recent call last):
    ...
    ValueError: mu: solver 'momentum' has no proximal term, got mu = 1.0 (use 'prox' or 'momentum-prox')

    A momentum solver without momentum would run under a name it does not deserve; it is refused too:

    >>> make_solver("momentum", 0.5, momentum=0.0)
    Traceback (most recent call last):
    ...
    ValueError: momentum must be > 0 for solver 'momentum', got 0.0 (without momentum use 'sgd')
    """
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {list(SOLVERS)}, got {name!r}")
    proximal, heavy_ball = name in ("prox", "momentum-prox"), name in ("momentum", "momentum-prox")
    if not proximal and not (_is_number(mu) and mu == 0):
        raise ValueError(f"mu: solver {name!r} has no proximal term, got mu = {plain(mu)!r} (use 'prox' or 'momentum-prox')")
    if not heavy_ball and momentum is not None:
        raise ValueError(f"momentum: solver {name!r} has no momentum buffer, got momentum = {plain(momentum)!r} (use "
                         "'momentum' or 'momentum-prox')")
    if heavy_ball and _is_number(momentum) and momentum == 0:  # rho = 0 would run the solver without momentum, so named
        plain_name = "sgd" if name == "momentum" else "prox"
        raise ValueError(f"momentum must be > 0 for solver {name!r}, got {plain(momentum)!r} (without momentum use "
                         f"{plain_name!r})")
    if name == "sgd":
        return sgd(lr, weight_decay)
    if name == "prox":
        if not _is_number(mu) or not mu > 0:
            raise ValueError(f"mu must be > 0 for the proximal solver, got {plain(mu)!r}")
        return proximal_sgd(lr, mu, weight_decay)
    if name == "momentum-prox" and (not _is_number(mu) or not mu > 0):  # mu = 0 would be plain momentum, so named
        raise ValueError(f"mu must be > 0 for the momentum + proximal solver, got {plain(mu)!r} (without a proximal "
                         "term use 'momentum')")
    momentum = 0.9 if momentum is None else momentum
    if name == "momentum":
        return momentum_sgd(lr, momentum, weight_decay)
    return momentum_proximal_sgd(lr, momentum, mu, weight_decay)


def check_shared_lr(name: str, solvers, lr: Optional[float] = None) -> list:
    r"""``solvers`` (a non-empty sequence of :class:`LocalSolver`; one solver alone or anything else is a
    ``ValueError`` naming ``name``) checked to share one base learning rate :math:`\eta` (``lr`` if given, else the
    first solver's).

    Every :math:`\|a_i\|_1` is counted in units of the solver's own :math:`\eta`
    (:meth:`LocalSolver.counter_step`), and eq. (4) divides each client's change by
    :math:`\eta\|a_i\|_1` with one :math:`\eta` (Theorem 3: :math:`a_i` may vary by client
    and round, :math:`\eta` does not). Clients with base rates 0.01 and 0.03 would report the
    same :math:`\|a_i\|_1` for changes three times apart: FedNova would weight the fast client
    three times (and land on FedAvg's surrogate), and :math:`\chi^2` would read 0. A client's
    own step size is a constant factor of :math:`\eta`, which its :math:`\|a_i\|_1` counts:
    ``LocalSolver(lr=eta, lr_schedule=lambda k: 3.0)``.

    Example
    -------
    Rates 0.01 and 0.03 are refused; the second client written as the shared :math:`\eta = 0.01`
    with a constant factor 3 is accepted, and its :math:`\|a_i\|_1` for 2 steps is :math:`3 + 3 = 6`:

    >>> check_shared_lr("solvers", [sgd(0.01), sgd(0.03)])
    Traceback (most recent call last):
    ...
    ValueError: solvers[1] has lr 0.03, but the clients share one base learning rate (0.01): ...
    >>> solvers = check_shared_lr("solvers", [sgd(0.01), LocalSolver(lr=0.01, lr_schedule=lambda k: 3.0)])
    >>> [s.a_norm(2) for s in solvers]
    [2.0, 6.0]
    """
    if isinstance(solvers, LocalSolver):  # list() of it raised "'LocalSolver' object is not iterable"
        raise ValueError(f"{name} must be a non-empty sequence of LocalSolver, got one LocalSolver (a list of one: "
                         f"[solver])")
    try:
        solvers = list(solvers)
    except TypeError:  # a number, None, a 0-d array or tensor
        raise ValueError(f"{name} must be a non-empty sequence of LocalSolver, got {type(solvers).__name__}") from None
    if not solvers or not all(isinstance(s, LocalSolver) for s in solvers):
        raise ValueError(f"{name} must be a non-empty sequence of LocalSolver")
    # a given lr by name: 'x' failed in math.isclose, NaN blamed solvers[0]'s lr for differing from it
    base = solvers[0].lr if lr is None else check_positive("lr", lr)
    for j, solver in enumerate(solvers):
        _check_base_lr(f"{name}[{j}]", solver, base)
    return solvers


def _check_base_lr(label: str, solver: LocalSolver, base: float) -> None:
    """:func:`check_shared_lr`'s check of one solver, ``label`` naming it in the ``ValueError``."""
    if not math.isclose(solver.lr, base, rel_tol=1e-12, abs_tol=0.0):
        raise ValueError(
            f"{label} has lr {solver.lr!r}, but the clients share one base learning rate ({base!r}): "
            "||a_i||_1 is counted in units of each solver's own lr, so FedNova's normalisation would be off by "
            f"their ratio; give a client its own step size as a constant factor of the base rate, "
            f"LocalSolver(lr={base!r}, lr_schedule=lambda k: {solver.lr / base:.6g}) (its ||a_i||_1 counts it)")


#: The methods that make up :class:`LocalSolver`'s step; a subclass that overrides any of them takes its own
#: step (:attr:`LocalSolver.builtin_step` false).
#: ``step_size`` too: LocalSolver's closed forms read only ``lr_schedule``, and the stacked engine fills its step-size
#: table from ``lr`` when ``lr_schedule`` is None, so an overridden ``step_size`` is a step of its own.
STEP_METHODS = ("init", "update", "counter_step", "_direction_and_params", "step_size")


def own_step_methods(cls: type) -> list:
    """The names of :data:`STEP_METHODS` that ``cls`` (a :class:`LocalSolver` subclass) overrides.

    Example
    -------
    :class:`LocalSolver` overrides nothing of its own; a subclass with its own ``update`` lists it:

    >>> class Logged(LocalSolver):
    ...     def update(self, state, grads):
    ...         return super().update(state, grads)
    >>> own_step_methods(LocalSolver), own_step_methods(Logged)
    ([], ['update'])
    """
    return [m for m in STEP_METHODS if getattr(cls, m) is not getattr(LocalSolver, m)]


def check_builtin_step(name: str, solvers, engine: str) -> None:
    r"""Raise ``ValueError`` unless every solver in ``solvers`` takes :class:`LocalSolver`'s own step
    (:attr:`LocalSolver.builtin_step`). ``engine`` names the engine that fuses that step and what to
    use instead: a subclass with its own ``update`` (e.g. Nesterov momentum) would otherwise be run
    with the built-in heavy-ball/prox step while reporting its own :math:`\|a_i\|_1`, and FedNova
    would normalise changes by the wrong vector without an error.

    ``name`` is the parameter the solvers came in as; the message begins with it. ``solvers`` is any iterable of
    solvers.

    Example
    -------
    Built-in solvers pass (``None``); a subclass with its own ``update`` is refused, and the message
    ends with the ``engine`` argument's text:

    >>> class Logged(LocalSolver):
    ...     def update(self, state, grads):
    ...         return super().update(state, grads)
    >>> check_builtin_step("solvers", [sgd(0.1), momentum_sgd(0.1)], "the stacked engine fuses")
    >>> check_builtin_step("solvers", [Logged(lr=0.1)], "the stacked engine fuses")
    Traceback (most recent call last):
    ...
    ValueError: solvers: Logged overrides LocalSolver's step (update), which the stacked engine fuses
    """
    for solver in solvers:
        own = own_step_methods(type(solver))
        if own:
            raise ValueError(f"{name}: {type(solver).__name__} overrides LocalSolver's step ({' / '.join(own)}), "
                             f"which {engine}")


#: Step counts at which :func:`check_own_step` probes a solver with its own step.
OWN_STEP_PROBES = (1, 2, 5)


def _own_closed_forms(cls: type) -> list:
    """The closed forms (``a_vector``, ``a_norm``) and the counter table ``online_a_norms`` (what the batched and
    stacked engines report as ||a_i||_1) that ``cls`` overrides: :func:`check_own_step` probes them."""
    return [m for m in ("a_vector", "a_norm", "online_a_norms") if getattr(cls, m) is not getattr(LocalSolver, m)]


def _probe_failed(name: str, cls: str, method: str, tau: int, err: Exception, copied: bool = False,
                  solver: Optional[LocalSolver] = None) -> str:
    if solver is not None and "NoneType" in str(err):
        # a step that uses state.momentum (or state.anchor) of a solver whose init leaves it None: not a numpy matter
        return (f"{name}: {cls}.{method} raised {type(err).__name__}: {err} while check_own_step probed it; "
                "LocalSolver.init leaves the state's momentum buffer None unless momentum > 0 (here "
                f"{solver.momentum!r}), its anchor None unless mu > 0 (here {solver.mu!r}) and its correction None "
                "without variance reduction: an update of your own must not compute with a field that is None "
                "(give the solver momentum > 0 if its step needs the buffer, or override init)")
    copy = (" The probe ran on a copy without weight decay (dataclasses.replace(solver, weight_decay=0.0)), which "
            "keeps only the dataclass fields: an attribute set after construction is not in it; make it a field."
            if copied and isinstance(err, AttributeError) else "")
    return (f"{name}: {cls}.{method} raised {type(err).__name__}: {err} while check_own_step probed it; the probe "
            f"runs on numpy float64 vectors (here of length {tau}), so a solver with its own step must accept "
            "numpy arrays as well as torch tensors (write it with fedlib.tree.tree_map and arithmetic operators, "
            "not tensor-only methods such as .clone() or torch.* calls)." + copy)


def check_own_step(name: str, solver: LocalSolver, *, correction: bool = False) -> LocalSolver:
    r"""``solver`` checked, if it has its own step (:attr:`LocalSolver.builtin_step` false), to report
    the :math:`\|a_i\|_1` of the step it takes; a built-in solver is returned unchecked.

    The probe is :func:`fedlib.anatomy.probe_a_vector`'s: :math:`\tau` steps on a
    :math:`\tau`-dimensional vector whose gradient at step :math:`k` is :math:`e_k` give
    :math:`G_i = I`, so :math:`a_i = -\Delta_i/\eta` (weight decay off); its sum must equal the
    ``a_norm`` the state reports after those steps (:meth:`LocalSolver.counter_step`) for
    :math:`\tau` in :data:`OWN_STEP_PROBES`, and ``update`` must advance ``step`` by one. Then, with
    :math:`a_i` of the last probe, :math:`\tau = 5` steps on a 2-vector with the gradients
    :math:`G` = :data:`LINEARITY_PROBE` (mixed signs and magnitudes) must move it by :math:`-\eta G a_i`
    (unit gradients alone cannot tell sign-SGD, Adam or clipping from SGD). A subclass
    that overrides ``update`` but keeps the heavy-ball counter, or a solver that is not linear in
    its gradients (eq. 4's :math:`\Delta_i = -\eta G_i a_i` does not hold), is refused with a
    ``ValueError``, where FedNova would otherwise normalise by a wrong :math:`\|a_i\|_1`. A subclass
    that overrides the closed forms ``a_vector`` / ``a_norm`` (which :func:`fedlib.engines.quadratic.run_replicas`
    and :func:`fedlib.schedules.population_tau_eff` use) is probed too: ``a_vector(tau)`` must have length
    :math:`\tau` and equal the probed :math:`a_i`, ``a_norm(tau)`` their sum; so is one that overrides
    ``online_a_norms`` (the batched and stacked engines' :math:`\|a_i\|_1`): it must be its ``counter_step``'s table, whose
    entry :math:`\tau - 1` is that sum.

    The probe runs on numpy ``float64`` vectors (params and gradients are 1-d ``np.ndarray``), whichever
    engine or loop will run the solver, so its ``init`` and ``update`` must accept numpy arrays
    (:func:`fedlib.tree.tree_map` with arithmetic operators works on numpy and torch alike); one that works
    only on torch tensors (``.clone()``, ``torch.*`` calls) is refused with a ``ValueError`` naming its
    class, the original error chained as its cause.

    Weight decay :math:`\lambda` and the VR correction :math:`c_i` are added to the gradient (the module
    docstring), so an own ``update`` must add ``weight_decay * x`` and ``state.correction`` to ``grads``
    itself. With ``solver.weight_decay > 0`` one step from :math:`x = 1` with a zero gradient must move
    :math:`x` by :math:`-\eta\,a^{(1)}\lambda`; with ``correction=True`` (an algorithm with control variates:
    SCAFFOLD, VRLSGD, FedNova-VR) one step from :math:`x = 0` with a zero gradient and correction 1 by
    :math:`-\eta\,a^{(1)}` (:math:`a^{(1)}`: its :math:`a_i` after one step). An ``update`` that leaves them
    out is refused with a ``ValueError``: it would drop them without a word.

    ``name`` is the parameter the solver came in as (``"solver"``, ``"solvers[2]"``); every message begins with it.
    Returns ``solver`` itself.

    Example
    -------
    A subclass whose ``update`` doubles every gradient but keeps SGD's counter moves a unit-gradient
    probe by :math:`-2\eta` per step while reporting :math:`\|a^{(1)}\|_1 = 1`: its true
    :math:`a_i` is :math:`(2)`, so it is refused at the first probe (:math:`\tau = 1`):

    >>> class Doubled(LocalSolver):
    ...     def update(self, state, grads):
    ...         return super().update(state, 2 * grads)
    >>> check_own_step("solver", Doubled(lr=0.5))
    Traceback (most recent call last):
    ...
    ValueError: solver: Doubled reports ||a_i||_1 = 1.0 after 1 step(s), but its update moves a unit-gradient probe by a_i = [2.0] (sum 2.0): ...
    """
    check_instance(name, solver, LocalSolver)
    own_closed = _own_closed_forms(type(solver))
    if solver.builtin_step and not own_closed:
        return solver
    cls = type(solver).__name__
    # a copy without weight decay only where there is some: dataclasses.replace builds a new instance, which loses
    # what the solver holds outside its fields (an attribute set after construction), and its probe then failed as
    # if the step could not take numpy arrays
    probe = solver if solver.weight_decay == 0 else dataclasses.replace(solver, weight_decay=0.0)
    for tau in OWN_STEP_PROBES:
        eye = np.eye(tau)
        try:
            state = probe.init(np.zeros(tau))
        except Exception as err:
            raise ValueError(_probe_failed(name, cls, "init", tau, err, probe is not solver, probe)) from err
        for k in range(tau):
            try:
                state = probe.update(state, eye[k])
            except Exception as err:
                raise ValueError(_probe_failed(name, cls, "update", tau, err, probe is not solver, probe)) from err
            if not isinstance(state, SolverState) or state.step != k + 1:
                got = state.step if isinstance(state, SolverState) else type(state).__name__
                raise ValueError(f"{name}: {cls}.update must return a SolverState with step advanced by one "
                                 f"({k} -> {k + 1}), got {got!r}")
        a = -np.asarray(state.params, dtype=np.float64) / probe.lr
        reported = float(state.a_norm)
        if not np.isclose(reported, a.sum(), rtol=1e-9, atol=1e-12):
            raise ValueError(f"{name}: {cls} reports ||a_i||_1 = {reported!r} after {tau} step(s), but its update "
                             f"moves a unit-gradient probe by a_i = {np.round(a, 12).tolist()} (sum {float(a.sum())!r}): "
                             "counter_step must be the solver's own step on a scalar unit gradient, in units of lr "
                             "(see LocalSolver.counter_step), and the step must be linear in the gradients")
        if "a_vector" in own_closed:
            closed = np.asarray(probe.a_vector(tau), dtype=np.float64)
            if closed.shape != (tau,) or not np.allclose(closed, a, rtol=1e-9, atol=1e-12):
                raise ValueError(f"{name}: {cls}.a_vector({tau}) is {np.round(closed, 12).tolist()} (shape "
                                 f"{closed.shape}), but its step gives a_i = {np.round(a, 12).tolist()} (length {tau})")
        if "a_norm" in own_closed:
            closed_norm = float(probe.a_norm(tau))
            if not np.isclose(closed_norm, a.sum(), rtol=1e-9, atol=1e-12):
                raise ValueError(f"{name}: {cls}.a_norm({tau}) is {closed_norm!r}, but its step gives "
                                 f"||a_i||_1 = {float(a.sum())!r}")
        if "online_a_norms" in own_closed:
            table = np.asarray(probe.online_a_norms(tau), dtype=np.float64)
            counter = LocalSolver.online_a_norms(probe, tau)  # its counter_step after 1..tau steps, checked above
            if (table.shape != (tau,) or not np.isclose(table[-1], a.sum(), rtol=1e-9, atol=1e-12)
                    or not np.allclose(table, counter, rtol=1e-9, atol=1e-12)):
                raise ValueError(f"{name}: {cls}.online_a_norms({tau}) is {np.round(table, 12).tolist()} (shape "
                                 f"{table.shape}), but its counter_step gives {np.round(counter, 12).tolist()} and its "
                                 f"step ||a_i||_1 = {float(a.sum())!r} after {tau} step(s) (entry k - 1: after k steps; "
                                 "the batched and stacked engines report it)")
        if tau == 1:
            a_one = float(a[0])
    if not solver.builtin_step:  # the built-in step is linear and adds both terms (_direction_and_params)
        _probe_linear(name, cls, probe, a)  # a: the unit probe's a_i at the last tau of OWN_STEP_PROBES
        if solver.weight_decay > 0:
            _probe_added_term(name, cls, solver, a_one, np.ones(1), None, "weight_decay",
                              f"weight_decay = {solver.weight_decay!r}", "weight_decay * x", solver.weight_decay)
        if correction:
            _probe_added_term(name, cls, probe, a_one, np.zeros(1), np.ones(1), "correction",
                              "a control-variate correction (the algorithm uses variance reduction)",
                              "state.correction", 1.0)
    return solver


def _behaviour_key(solver: LocalSolver) -> tuple:
    """What ``solver``'s checks depend on, as a hashable key: its class and the type and value of every
    dataclass field when the solver holds nothing else (a frozen dataclass instance whose ``__dict__`` is its
    fields, no ``__slots__`` of a subclass), so equal fresh copies share one key; otherwise (state outside the
    fields, or a field value that is not hashable) its identity. The class's own ``__eq__`` / ``__hash__`` are
    not used: a subclass that is no dataclass of its own, or that defines them, could call two solvers
    that step differently equal."""
    cls = type(solver)
    try:
        fields = dataclasses.fields(solver)
        state = vars(solver)
        if len(state) == len(fields) and not any(c.__dict__.get("__slots__") for c in cls.__mro__):
            key = (cls,) + tuple((f.name, type(state[f.name]), state[f.name]) for f in fields)
            hash(key)
            return key
    except (TypeError, KeyError):  # no __dict__, a field that is not set, an unhashable value
        pass
    return ("id", id(solver))


class OwnStepChecks:
    r""":func:`check_own_step` remembered for one run: :meth:`check` probes each distinct solver once (its class
    and field values, else the object itself) and passes it at once afterwards. A
    ``solver_at`` or a :class:`fedlib.optim.ClientOptimizer` that hands out the same few solvers every client and
    round (fresh equal copies included) is probed once per solver, not once per client and round (five extra
    updates of the linearity probe each time). A solver is refused, with :func:`check_own_step`'s message, the
    first time it is given. Make one per run (nothing is shared between runs: a class changed between two runs
    is probed again); the solvers it keys by identity are kept alive, so their ids are not reused. A solver
    mutated in place (``object.__setattr__`` on the frozen dataclass) gets a new key and is probed again.

    Example
    -------
    >>> checks = OwnStepChecks()
    >>> class Doubled(LocalSolver):
    ...     def update(self, state, grads):
    ...         return super().update(state, 2 * grads)
    >>> checks.check("solver", sgd(0.1)).lr, len(checks)  # a built-in solver: nothing to probe
    (0.1, 0)
    >>> checks.check("client 3", Doubled(lr=0.5))
    Traceback (most recent call last):
    ...
    ValueError: client 3: Doubled reports ||a_i||_1 = 1.0 after 1 step(s), but its update moves a unit-gradient probe by a_i = [2.0] (sum 2.0): ...
    """

    #: The most solvers remembered; the oldest is forgotten, and probed again if it comes back (a ``solver_at``
    #: that builds a new ``lr_schedule`` closure every call gives a new key every call).
    MAX_REMEMBERED = 256

    def __init__(self):
        self._passed: dict = {}  # key -> the solver (keeps an id-keyed solver alive while its key is here)

    def __len__(self) -> int:
        return len(self._passed)

    def check(self, name: str, solver: LocalSolver, *, correction: bool = False) -> LocalSolver:
        """``check_own_step(name, solver, correction=correction)``, once per distinct solver and ``correction``."""
        if solver.builtin_step and not _own_closed_forms(type(solver)):  # check_own_step probes nothing
            return solver
        key = (_behaviour_key(solver), bool(correction))
        if key not in self._passed:
            check_own_step(name, solver, correction=correction)
            if len(self._passed) >= self.MAX_REMEMBERED:
                del self._passed[next(iter(self._passed))]
            self._passed[key] = solver
        return solver

    def check_round_lr(self, base: LocalSolver, solver: LocalSolver, round_index: int, *,
                       correction: bool = False) -> LocalSolver:
        r""":meth:`check` of ``solver`` = ``base.with_lr(lr)``, round ``round_index``'s solver at another lr than
        ``base``'s (an ``lr_at`` decay), named ``"algorithm.solver.with_lr(lr) (round t's lr)"``, with ``correction``
        as :meth:`check` takes it (the algorithm adds control variates): an algorithm probes its solver's
        own step at its own lr only, where a step that ignores ``self.lr`` (a step size written into ``update``)
        passes, then reports its :math:`\|a_i\|_1` in units of a round lr it does not take. Used by
        :func:`fedlib.engines.reference.run_sequential` and :func:`fedlib.engines.batched.run_batched`
        (``fast=False``). Only an lr strictly between :math:`10^{-200}` and :math:`10^{200}` is probed (the bounds
        are not): the probe's own arithmetic would overflow or lose its digits beyond them (and the round's steps
        diverge or vanish)."""
        lr = solver.lr
        if lr == base.lr or not 1e-200 < lr < 1e200:
            return solver
        return self.check(f"algorithm.solver.with_lr({lr!r}) (round {round_index}'s lr)", solver, correction=correction)


#: The gradients of the linearity probe of :func:`check_own_step`, column ``k`` the gradient of step ``k`` of a
#: 2-vector (mixed signs, magnitudes from 0.3 to 40, the two entries in other ratios at every step).
LINEARITY_PROBE = np.array([[3.0, -0.5, 40.0, -7.0, 0.3],
                            [0.25, 6.0, -2.0, 0.75, -12.0]])


def _probe_linear(name: str, cls: str, solver: LocalSolver, a: np.ndarray) -> None:
    r"""``len(a)`` steps of ``solver`` (weight decay off) from :math:`x = 0` with the gradients
    :math:`G` = :data:`LINEARITY_PROBE` must move :math:`x` by :math:`-\eta G a`, ``a`` the :math:`a_i` its
    unit-gradient probe gave: eq. (4)'s :math:`\Delta_i = -\eta G_i a_i`. A step that is not linear in the
    gradients (sign-SGD, Adam, a clipped or squared gradient) agrees with every unit gradient :math:`e_k`,
    so the unit probe alone let it through, and FedNova divided its change by an :math:`\|a_i\|_1` it has not."""
    grads = LINEARITY_PROBE[:, :a.size]
    try:
        state = solver.init(np.zeros(grads.shape[0]))
        for k in range(a.size):
            state = solver.update(state, grads[:, k].copy())
    except Exception as err:
        raise ValueError(_probe_failed(name, cls, "update", grads.shape[0], err, solver=solver)) from err
    got = np.asarray(state.params, dtype=np.float64)
    expected = -solver.lr * (grads @ a)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-9,
                                                      atol=1e-12 * float(np.abs(expected).max())):
        raise ValueError(f"{name}: {cls}'s update is not linear in the gradients: {a.size} steps with the gradients "
                         f"G = {grads.tolist()} (columns) move x from 0 to {np.round(got, 12).tolist()}, not to "
                         f"-lr G a_i = {np.round(expected, 12).tolist()} (a_i = {np.round(a, 12).tolist()} from its "
                         "unit-gradient probe); eq. (4) needs Delta_i = -lr G_i a_i, which a step such as sign-SGD, "
                         "Adam or gradient clipping does not have (FedNova would divide its change by a wrong "
                         "||a_i||_1)")


def _probe_added_term(name: str, cls: str, solver: LocalSolver, a_one: float, x: np.ndarray, corr, what: str,
                      given: str, term: str, size: float) -> None:
    """One step of ``solver`` from ``x`` with a zero gradient (and correction ``corr``): the term added to the
    gradient (``size`` at ``x``) must move it by ``-lr * a_one * size``, ``a_one`` its one-step :math:`a_i`."""
    try:
        state = solver.init(x.copy(), corr)
    except Exception as err:
        raise ValueError(_probe_failed(name, cls, "init", 1, err, solver=solver)) from err
    try:
        state = solver.update(state, np.zeros(1))
    except Exception as err:
        raise ValueError(_probe_failed(name, cls, "update", 1, err, solver=solver)) from err
    got = float(np.asarray(state.params, dtype=np.float64)[0])
    expected = float(x[0]) - solver.lr * a_one * size
    if not np.isclose(got, expected, rtol=1e-9, atol=1e-12):
        raise ValueError(f"{name}: {cls} is given {given}, but its update leaves it out: one step from x = {float(x[0])!r} "
                         f"with a zero gradient gives {got!r}, not {expected!r}; {what} is added to the gradient, so "
                         f"an update of your own must add {term} to grads (as the built-in update does)")

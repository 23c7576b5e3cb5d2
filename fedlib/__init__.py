r"""fedlib: the general update rule of FedNova (Wang et al., NeurIPS 2020), verified.

Modules mirror the paper:

- :mod:`fedlib.rule` — eq. (4): :math:`d_i`, :math:`\tau_{\text{eff}}`, :math:`w_i`, aggregation
- :mod:`fedlib.solvers` — local solvers and their :math:`a_i` (App. B)
- :mod:`fedlib.server` — server optimizers (plain, momentum, FedAdam)
- :mod:`fedlib.variance` — control variates (SCAFFOLD, VRLSGD, FedNova-VR)
- :mod:`fedlib.schedules` — local steps :math:`\tau_i^{(t)}` (epochs, random epochs, wall clock)
- :mod:`fedlib.sampling` — unbiased client sampling (App. G)
- :mod:`fedlib.theory` — :math:`\chi^2`, slowdown, Theorems 1 and 2 (with App. C's constants), App. G's step-size
  conditions, FedProx, D.1, quadratic fixed points
- :mod:`fedlib.algorithms` — FedAvg, FedProx, FedNova, SCAFFOLD, VRLSGD, FedNova-VR
- :mod:`fedlib.optim` — a local solver as a ``torch.optim.Optimizer``: FedNova in your own loop (resumed from a
  checkpoint: :func:`fedlib.checkpoint.save_checkpoint`, then :func:`fedlib.checkpoint.to_torch_tree`)
- :mod:`fedlib.problems`, :mod:`fedlib.data`, :mod:`fedlib.models` — problems and data
- :mod:`fedlib.engines` — reference loop, quadratic-replica, batched and stacked-client engines

Integers and whole numbers
--------------------------
A parameter documented as *an integer* takes an ``int`` or a numpy integer: ``2.0`` is refused. One documented
as *a whole number* also takes a float without a fractional part: ``2.0`` is taken as 2. Neither takes ``1.5`` or
``True``. An array of *whole numbers* (the :math:`\tau_i` of ``local_steps``) takes ``[2.0, 3.0]`` alike. A count
of local steps or epochs (``local_steps``, ``tau``, ``steps``, ``epochs``, the ``low`` and ``high`` of their ranges)
is a whole number, one or an array of them; seeds, rounds, numbers of clients, sizes and indices are integers.

Extending fedlib
----------------
Each piece of eq. (4), :math:`x \leftarrow x - \tau_{\text{eff}}\sum_i w_i\eta d_i` with
:math:`d_i = G_i a_i/\|a_i\|_1`, can be replaced through the public API; ``tests/test_extensions.py``
runs one example of each against eq. (4) worked by hand. fedlib checks an extension where it receives it
and refuses a malformed one with a ``ValueError`` naming it.

* **Local solver** (its own :math:`a_i`). A step size that changes within the round:
  ``LocalSolver(lr, lr_schedule=k -> s_k)`` (:func:`fedlib.solvers.decayed_sgd`). Another linear step
  (e.g. Nesterov momentum): a frozen-dataclass subclass of :class:`fedlib.solvers.LocalSolver` that
  overrides ``update(state, grads) -> SolverState`` (advance ``step`` by one, set
  ``shadow = self.counter_step(state.step, state.shadow)`` and ``a_norm = shadow[0]``; add ``weight_decay * x`` and
  ``state.correction``, when set, to ``grads``: they belong to :math:`G_i`; :func:`fedlib.tree.tree_map` works on
  numpy and torch trees; ``LocalSolver.init``'s state holds a zero ``momentum`` buffer only when ``momentum > 0`` and
  the ``anchor`` :math:`x^{(t,0)}` only when ``mu > 0``, else ``None``) and
  ``counter_step(k, counter)`` (the same step on a scalar unit gradient, in units of ``lr``: ``counter`` is the
  pair :math:`(\|a^{(k)}\|_1, \hat u_k)` before step ``k``, from 0; ``init`` starts it at ``(0.0, 0.0)``), and, if you
  have them, the closed forms ``a_vector`` / ``a_norm`` (otherwise they are taken from its own step: its
  counter and a unit-gradient probe, never the built-in step's formulas). :func:`fedlib.solvers.check_own_step` probes it (the
  reported :math:`\|a_i\|_1` and any closed form it overrides against the :math:`a_i` its step gives, and that
  its step adds a weight decay it is given and, under variance reduction, the correction, on
  numpy ``float64`` vectors, so ``update`` must accept numpy arrays as well as torch tensors)
  when an algorithm, ``solver_at`` or :class:`fedlib.optim.ClientOptimizer` receives it;
  :func:`fedlib.anatomy.check_update_rule` compares its :math:`\Delta_i` with :math:`-\eta G_i a_i`.
  Such a solver runs in :func:`fedlib.engines.reference.run_sequential`, ``run_batched(fast=False)`` (if it
  keeps ``LocalSolver.init``) and ``ClientOptimizer``; the engines that fuse the built-in step refuse it
  (:attr:`fedlib.solvers.LocalSolver.builtin_step`). In your own loop you may also build the
  :class:`fedlib.algorithms.ClientUpdate` yourself, with your own :math:`\|a_i\|_1`.
* **Server optimizer**: ``ServerOptimizer(init, update, name)``, ``update(change, state, params, lr) ->
  (new_params, new_state)`` (:mod:`fedlib.server`).
* **Local steps** :math:`\tau_i^{(t)}`: any object with ``local_steps(round) -> (m,)`` whole numbers
  :math:`\ge 0` (:func:`fedlib.schedules.round_local_steps`; participants need :math:`\ge 1`); it is all the
  engines need (:func:`fedlib.engines.quadratic.run_replicas`: with one solver;
  several solvers need ``draw(round) -> (steps, solver_numbers)``, as :class:`fedlib.schedules.RandomLocalWork`).
  What needs the :math:`\tau_i` distribution in closed form takes the built-in schedules only:
  :func:`fedlib.schedules.population_tau_eff` (``FixedSteps``, ``RandomSteps``, ``FixedEpochs``,
  ``RandomEpochs``) and :mod:`fedlib.experiments.speedup` (``RandomLocalWork``); for a schedule of your own, pass
  the :math:`\tau_{\text{eff}}` you computed as ``tau_eff``.
* **Client sampling** and **weights** :math:`w_i`: ``sampling=`` a callable ``round -> Participation``
  (:func:`fedlib.sampling.round_participation`) in ``run_sequential``, ``run_batched``, ``run_replicas``
  and the stacked engines' ``RunSpec(sampling=...)``; FedNova's
  :math:`w_i` are the participation weights, so a sampler returning every client with your weights sets
  them (taken as given, not normalised: eq. (4)'s :math:`w_i` sum to 1, and weights summing to :math:`s` scale
  FedNova's step by :math:`s^2`, as its default :math:`\tau_{\text{eff}} = \sum_i w_i\|a_i\|_1` grows by :math:`s`
  too; with a number ``tau_eff``, by :math:`s`). :math:`\tau_{\text{eff}}`: ``make_algorithm("fednova", solver, tau_eff=...)`` (a number or a policy,
  :func:`fedlib.rule.fednova_weights`); eq. (4) on your own deltas: :func:`fedlib.rule.aggregate`.
* **Model and data**: a :class:`fedlib.data.clients.FederatedDataset` for the logistic engines; your own
  ``torch.nn.Module`` through :mod:`fedlib.experiments.custom` or your own loop with
  :class:`fedlib.optim.ClientOptimizer` (chapter 6). The stacked engine
  (:class:`fedlib.engines.stacked.StackedEngine`) refuses buffers (BatchNorm), training-mode
  behaviour other than ``nn.Dropout``, backward hooks, and on the grouped path any hook (it never calls the
  modules), those registered for all modules (``torch.nn.modules.module.register_module_*``) included, also
  one registered after the engine is built; the vmap path, which :mod:`fedlib.experiments.custom` uses,
  runs forward hooks and pre-hooks.
"""
__version__ = "0.1.0"

from . import algorithms, rng, rule, sampling, schedules, server, solvers, theory, tree, variance  # noqa: F401
from .algorithms import FederatedAlgorithm, make_algorithm  # noqa: F401

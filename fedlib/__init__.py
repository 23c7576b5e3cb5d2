"""fedlib: the general update rule of FedNova (Wang et al., NeurIPS 2020), verified.

Modules mirror the paper:

- :mod:`fedlib.rule` — eq. (4): :math:`d_i`, :math:`\\tau_{\\text{eff}}`, :math:`w_i`, aggregation
- :mod:`fedlib.solvers` — local solvers and their :math:`a_i` (App. B)
- :mod:`fedlib.server` — server optimizers (plain, momentum, FedAdam)
- :mod:`fedlib.variance` — control variates (SCAFFOLD, VRLSGD, FedNova-VR)
- :mod:`fedlib.schedules` — local steps :math:`\\tau_i^{(t)}` (epochs, random epochs, wall clock)
- :mod:`fedlib.sampling` — unbiased client sampling (App. G)
- :mod:`fedlib.theory` — :math:`\\chi^2`, slowdown, Theorems 1 and 2 (with App. C's constants), FedProx, D.1,
  quadratic fixed points
- :mod:`fedlib.algorithms` — FedAvg, FedProx, FedNova, SCAFFOLD, VRLSGD, FedNova-VR
- :mod:`fedlib.optim` — a local solver as a ``torch.optim.Optimizer``: FedNova in your own loop
- :mod:`fedlib.problems`, :mod:`fedlib.data`, :mod:`fedlib.models` — problems and data
- :mod:`fedlib.engines` — reference loop, batched and stacked-client engines
"""
__version__ = "0.1.0"

from . import algorithms, rng, rule, sampling, schedules, server, solvers, theory, tree, variance  # noqa: F401
from .algorithms import FederatedAlgorithm, make_algorithm  # noqa: F401

"""An object of the wrong kind where fedlib expects one of its own (a problem, an algorithm, a solver, a model,
control variates, a clock, a data set) is refused with a ``ValueError`` naming the parameter and the class it
must be, not an ``AttributeError`` from the first attribute read (``'NoneType' object has no attribute 'H'``)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest
import torch

import fedlib
from fedlib import algorithms as AL
from fedlib import anatomy as AN
from fedlib import rule as R
from fedlib import solvers as S
from fedlib import variance as V
from fedlib.engines import grouped as G
from fedlib.engines.reference import run_sequential
from fedlib.experiments import cifar10 as C
from fedlib.experiments import stragglers as ST
from fedlib.schedules import FixedSteps

#: Public functions whose first required parameter is ``problem`` but which do not read it (an algorithm
#: factory is called as ``factory(problem, setting)``; these two ignore it, or read it only when sampling).
IGNORES_PROBLEM = {"fedlib.experiments.synthetic.fedavg_sgd", "fedlib.experiments.synthetic.fednova_sgd"}


def _public_functions_taking_problem_first():
    found = {}
    for info in pkgutil.walk_packages(fedlib.__path__, "fedlib."):
        if ".cli" in info.name or "._" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            fn = getattr(module, name)
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            required = [p for p in inspect.signature(fn).parameters.values()
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if required and required[0].name == "problem":
                found[f"{module.__name__}.{name}"] = (fn, [p.name for p in required])
    return found


FUNCTIONS = _public_functions_taking_problem_first()


def test_the_scan_finds_the_problem_functions():
    """The scan is not empty by mistake: every experiment module's problem functions are in it."""
    modules = {key.rsplit(".", 1)[0] for key in FUNCTIONS}
    assert {"fedlib.experiments.quadratic", "fedlib.experiments.acceleration", "fedlib.experiments.bounds",
            "fedlib.experiments.speedup", "fedlib.experiments.stragglers", "fedlib.experiments.surrogate",
            "fedlib.experiments.synthetic", "fedlib.tradeoff", "fedlib.engines.quadratic"} <= modules
    assert len(FUNCTIONS) >= 60, sorted(FUNCTIONS)


@pytest.mark.parametrize("key", sorted(set(FUNCTIONS) - IGNORES_PROBLEM))
@pytest.mark.parametrize("wrong", [None, "problem", {"H": 1}])
def test_a_wrong_problem_is_refused_by_name(key, wrong):
    """Before: ``AttributeError: 'NoneType' object has no attribute 'dim'`` (run_quadratic), ``... 'num_clients'``
    (surrogate_optimum, measured_fedprox_weights, newton_minimize, ...), ``... 'H'`` (fixed_point,
    round_contraction), ``... 'p'`` (logistic_optimum). The other arguments are placeholders: the problem is
    checked first."""
    fn, required = FUNCTIONS[key]
    kwargs = {name: (wrong if name == "problem" else 1) for name in required}
    with pytest.raises(ValueError, match=r"^problem must be a fedlib\.problems\.(quadratic\.QuadraticProblem|"
                                         rf"logistic\.LogisticProblem), got {type(wrong).__name__}$"):
        fn(**kwargs)


def _torch_only():
    return torch.nn.Linear(2, 2)


OTHER = [
    ("run_sequential algorithm", lambda: run_sequential(None, np.zeros(2), lambda x, i, r, s: x, [1.0],
                                                        FixedSteps([1]), 1),
     r"^algorithm must be a fedlib\.algorithms\.FederatedAlgorithm \(fedlib\.algorithms\.make_algorithm\(\.\.\.\)\)"
     r", got NoneType$"),
    ("server_state_mismatch algorithm", lambda: AL.server_state_mismatch(None, None),
     r"^algorithm must be a fedlib\.algorithms\.FederatedAlgorithm .*, got NoneType$"),
    ("server_state_mismatch state", lambda: AL.server_state_mismatch(AL.make_algorithm("fedavg", S.sgd(0.1)), None),
     r"^state must be a fedlib\.algorithms\.ServerState .*, got NoneType$"),
    ("check_own_step solver", lambda: S.check_own_step("solvers[1]", None),
     r"^solvers\[1\] must be a fedlib\.solvers\.LocalSolver, got NoneType$"),
    ("a_norm_curves solver", lambda: AN.a_norm_curves(None, 3),
     r"^solver must be a fedlib\.solvers\.LocalSolver, got NoneType$"),
    ("probe_a_vector solver", lambda: AN.probe_a_vector("sgd", 3),
     r"^solver must be a fedlib\.solvers\.LocalSolver, got str$"),
    ("traced_clients data", lambda: AN.traced_clients(None, 1, 2, 0),
     r"^data must be a federated data set with train_x, train_y and num_classes .*, got NoneType without "
     r"train_x, train_y, num_classes$"),
    ("traced_clients data dict", lambda: AN.traced_clients({"train_x": [], "train_y": []}, 1, 2, 0),
     r"^data must be a federated data set .*, got dict without train_x, train_y, num_classes$"),
    ("correction state", lambda: V.correction(None, 0),
     r"^state must be a fedlib\.variance\.ControlVariates \(control_variates\(\.\.\.\) or "
     r"init_control_variates\(\.\.\.\)\), got NoneType$"),
    ("update_control_variates state", lambda: V.update_control_variates(None, [0], [np.zeros(1)], 0.1, [1], [1.0]),
     r"^state must be a fedlib\.variance\.ControlVariates .*, got NoneType$"),
    ("updated_client_variates state", lambda: V.updated_client_variates((), [0], [np.zeros(1)], 0.1, [1]),
     r"^state must be a fedlib\.variance\.ControlVariates .*, got tuple$"),
    ("sync_steps_of clock", lambda: ST.sync_steps_of(None),
     r"^clock must be a fedlib\.schedules\.WallClock, got NoneType$"),
    ("registered_hooks model", lambda: G.registered_hooks(None),
     r"^model must be a torch\.nn\.modules\.module\.Module, got NoneType$"),
    ("GroupedNetwork model", lambda: G.GroupedNetwork(lambda x: x, 2, device="cpu"),
     r"^model must be a torch\.nn\.modules\.module\.Module, got function$"),
    ("aggregate deltas", lambda: R.aggregate(None, [1.0], [1.0]),
     r"^deltas must be a sequence of the clients' changes, .*, got a NoneType$"),
    ("bench_cifar10 data", lambda: C.bench_cifar10(None),
     r"^data must be an object with the attributes train_images .* got NoneType without train_images and "
     r"train_labels$"),
    ("run_setup run", lambda: C.run_setup(None), r"^run must be a mapping, one of train_runs' runs .*, got NoneType$"),
    ("run_seconds result", lambda: C.run_seconds("result.json"),
     r"^result must be a result document \(a mapping, .*\), got str$"),
]


@pytest.mark.parametrize("label, call, message", OTHER, ids=[case[0] for case in OTHER])
def test_a_wrong_object_is_refused_by_name(label, call, message):
    """Before, each ended in an AttributeError (or a TypeError) from inside: ``'NoneType' object has no attribute
    'init'`` (run_sequential), ``... 'a_vector'`` (check_own_step), ``... 'client'`` (the variance functions),
    ``... 'speeds'`` (sync_steps_of), ``... 'named_modules'`` (registered_hooks), ``... 'train_labels'``
    (bench_cifar10), ``'NoneType' object is not iterable`` (aggregate), ``... is not subscriptable`` (run_setup)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_the_checks_take_what_they_took():
    """A subclass is an instance: the checks refuse only what the code could not run."""
    class MyQuadratic(fedlib.problems.QuadraticProblem):
        pass

    base = fedlib.problems.random_quadratic(2, 2, seed=0)
    mine = MyQuadratic(base.H, base.e, base.p)
    from fedlib.experiments.quadratic import surrogate_optimum
    np.testing.assert_array_equal(surrogate_optimum(mine, [0.5, 0.5]), surrogate_optimum(base, [0.5, 0.5]))
    assert re.fullmatch(r"fedlib\.problems\.quadratic", type(base).__module__)


def test_replicate_refuses_local_work_for_another_number_of_clients():
    """Before: replicate(problem of 3 clients, work of 2, copies=2) returned a problem of 6 clients and work of 4
    without a word (each copy tiled on its own); every other function of fedlib.experiments.speedup refused the pair
    (_check_work)."""
    from fedlib.experiments.speedup import replicate
    from fedlib.schedules import RandomLocalWork

    problem = fedlib.problems.random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match=r"^work: local work for 2 clients, the problem has 3$"):
        replicate(problem, RandomLocalWork([1, 1], [2, 3], 1, 0), 2)
    rep, work = replicate(problem, RandomLocalWork([1, 1, 2], [2, 3, 4], 1, 0), 2)
    assert rep.num_clients == work.num_clients == 6

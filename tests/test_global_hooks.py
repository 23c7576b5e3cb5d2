"""Hooks registered for all modules at once (``torch.nn.modules.module.register_module_*``) and the stacked
engines: the grouped path never calls the modules, so it silently trained without them, and on the vmap path a
global backward hook made torch.func fail inside the first round with an autograd.Function RuntimeError;
``evaluate()`` alone checks for a global hook added later too. Each
test fails on the code before the fix. Every global hook is removed by the fixture, also when a test fails
(pytest-xdist runs other files in this process)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

from fedlib.algorithms import make_algorithm
from fedlib.engines.grouped import GroupedNetwork, refuse_global_hooks_added_later, registered_hooks
from fedlib.engines.stacked import RunSpec, StackedEngine
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd


@pytest.fixture
def global_hooks():
    """Register global hooks through ``register(kind, hook)``; all are removed afterwards."""
    handles = []
    register = {"forward": torch_module.register_module_forward_hook,
                "forward_pre": torch_module.register_module_forward_pre_hook,
                "backward": torch_module.register_module_full_backward_hook}

    def add(kind, hook):
        handles.append(register[kind](hook))
        return handles[-1]

    yield add
    for handle in handles:
        handle.remove()
    assert registered_hooks(nn.Linear(1, 1)) == []


def _engine(path, rounds=1):
    images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    return StackedEngine(model, data, [run], rounds=rounds, batch_size=4, augment=False, dropout=False, path=path)


def _doubling(module, inputs, output):
    return output * 2


def test_registered_hooks_lists_global_hooks_last(global_hooks):
    model = nn.Sequential(nn.Linear(2, 2))
    model[0].register_forward_pre_hook(lambda module, inputs: None)
    global_hooks("forward", _doubling)
    global_hooks("backward", lambda module, grad_in, grad_out: None)
    rows = registered_hooks(model)
    assert [row[:3] for row in rows] == [("0", "Linear", "forward pre-hook"), ("all modules", "global", "forward hook"),
                                         ("all modules", "global", "backward hook")]
    assert rows[1][3] == "_doubling"


@pytest.mark.parametrize("kind", ["forward", "forward_pre"])
def test_grouped_path_refuses_a_global_forward_hook(global_hooks, kind):
    hook = _doubling if kind == "forward" else (lambda module, inputs: None)
    global_hooks(kind, hook)
    with pytest.raises(ValueError, match=r"^every module \(a global hook: .*register_module_\*\) has a forward "
                                         r"(pre-)?hook .*silently not run"):
        _engine("grouped")
    with pytest.raises(ValueError, match="every module"):
        GroupedNetwork(nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)), 2, device="cpu")


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_both_paths_refuse_a_global_backward_hook_when_built(global_hooks, path):
    global_hooks("backward", lambda module, grad_in, grad_out: None)
    with pytest.raises(ValueError, match=r"^every module \(a global hook.* has a backward hook"):
        _engine(path)


def test_vmap_path_runs_a_global_forward_hook(global_hooks):
    """The vmap path calls the modules, so a global forward hook runs, as for the user's own model."""
    plain = _engine("vmap").run_round()[0].train_loss
    calls = []
    global_hooks("forward", lambda module, inputs, output: (calls.append(type(module).__name__), output * 2)[1])
    hooked = _engine("vmap").run_round()[0].train_loss
    assert calls and hooked != plain


@pytest.mark.parametrize("path, kind, refused", [("grouped", "forward", True), ("grouped", "backward", True),
                                                 ("vmap", "forward", False), ("vmap", "backward", True)])
def test_a_global_hook_registered_after_the_engine_is_refused_where_it_would_not_run(global_hooks, path, kind,
                                                                                     refused):
    engine = _engine(path, rounds=2)
    engine.run_round()
    global_hooks(kind, _doubling if kind == "forward" else (lambda module, grad_in, grad_out: None))
    if refused:
        with pytest.raises(ValueError, match=rf"^a {kind} hook .* was registered for all modules after the engine"):
            engine.run_round()
        assert engine.round_index == 1  # nothing of round 1 ran
    else:
        engine.run_round()
        assert engine.round_index == 2


def test_refuse_global_hooks_added_later_is_silent_without_hooks():
    refuse_global_hooks_added_later("grouped")
    refuse_global_hooks_added_later("vmap")


# --------------------------------------------------------------------------- evaluate() and a global hook added later
def _evaluate_engine(path):
    images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2,
                           test_images=images[:4], test_labels=np.arange(4) % 2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    return StackedEngine(model, data, [run], rounds=1, batch_size=4, augment=False, dropout=False, path=path)


@pytest.mark.parametrize("path, refused", [("grouped", True), ("vmap", False)])
def test_evaluate_refuses_a_global_forward_hook_added_later_where_it_would_not_run(path, refused):
    engine = _evaluate_engine(path)
    handle = torch_module.register_module_forward_hook(lambda module, inputs, output: output * 2)
    try:
        if refused:
            with pytest.raises(ValueError, match="registered for all modules after the engine was built"):
                engine.evaluate()
        else:
            engine.evaluate()
    finally:
        handle.remove()
    assert registered_hooks(nn.Linear(1, 1)) == []
    engine.evaluate()

"""A user's hooks on the model given to the stacked engines: the grouped path refuses forward hooks it
would skip, the vmap path runs them as the per-client loop does, both refuse backward hooks when built,
and the engines add no hook of their own to the user's model."""
from __future__ import annotations

import re

import pytest


# --------------------------------------------------------------------------- user hooks in the engines
def _hook_setup(hook: str | None, dropout: bool = False):
    import numpy as np
    import torch
    from torch import nn
    from types import SimpleNamespace

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 3)]
    if dropout:
        layers.insert(4, nn.Dropout(0.5))
    model = nn.Sequential(*layers).double()
    if hook == "forward":
        model[3].register_forward_hook(lambda module, inputs, output: 2 * output)
    elif hook == "pre":
        model[-1].register_forward_pre_hook(lambda module, inputs: (2 * inputs[0],))
    elif hook == "model":
        model.register_forward_hook(lambda module, inputs, output: 2 * output)
    elif hook == "backward":
        model[3].register_full_backward_hook(lambda module, grad_in, grad_out: (2 * grad_in[0],))
    g = torch.Generator().manual_seed(1)
    data = SimpleNamespace(train_images=torch.randint(0, 256, (24, 4, 4, 3), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (24,), generator=g))
    run = RunSpec(make_algorithm("fedavg", sgd(0.1)), [np.arange(12), np.arange(12, 24)], FixedSteps([2, 3]), seed=0,
                  params={n: p.detach().clone() for n, p in model.named_parameters()})
    return model, data, run


_ENGINE = dict(rounds=1, batch_size=4, padding=0, augment=False)


@pytest.mark.parametrize("hook, where, kind", [("forward", "layer '3' (Linear)", "forward hook"),
                                               ("pre", "layer '5' (Linear)", "forward pre-hook"),
                                               ("model", "the model (Sequential)", "forward hook")])
def test_grouped_path_refuses_a_model_with_forward_hooks(hook, where, kind):
    """The grouped path computes the layers from their weights: a hook doubling a layer's output was
    silently skipped (the trained parameters equal those of the model without the hook, difference 0,
    where the per-client loop and the vmap path differ from them by 12 %)."""
    import torch

    from fedlib.engines.stacked import StackedEngine

    model, data, run = _hook_setup(hook)
    with pytest.raises(ValueError, match=rf"^{re.escape(where)} has a {kind} \(.*<lambda>\): the grouped path "
                                         r"rebuilds the network .* use path='vmap'"):
        StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)


@pytest.mark.parametrize("hook", ["forward", "pre", "model"])
def test_vmap_path_runs_forward_hooks_as_the_per_client_loop(hook):
    """A guard (held before): the vmap path, which the grouped path's error points to, calls the hooks
    and ends where the per-client loop ends (3e-16 measured), unlike the model without them."""
    import torch

    from fedlib.engines.stacked import StackedEngine, max_relative_difference, reference_run

    model, data, run = _hook_setup(hook)
    plain, _, plain_run = _hook_setup(None)
    engine = StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    engine.train()
    ref = reference_run(model, data, run, rounds=1, batch_size=4, augment=False, padding=0)
    unhooked = reference_run(plain, data, plain_run, rounds=1, batch_size=4, augment=False, padding=0)
    assert max_relative_difference(engine.params(0), ref.state.params) < 1e-12
    assert max_relative_difference(ref.state.params, unhooked.state.params) > 1e-2  # the hook changed the training


def test_backward_hooks_are_refused_by_both_paths_when_built():
    """The vmap path failed only at the first local step, inside torch.func ('In order to use an
    autograd.Function with functorch transforms ...'); the grouped path ignored the hook."""
    import torch

    from fedlib.engines.stacked import StackedEngine

    model, data, run = _hook_setup("backward")
    with pytest.raises(ValueError, match=r"^layer '3' \(Linear\) has a backward hook \(.*\): the vmap path "
                                         r"differentiates with torch.func"):
        StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    with pytest.raises(ValueError, match=r"^layer '3' \(Linear\) has a backward hook \(.*\): the stacked engines run "
                                         r"no backward hooks"):
        StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)


def test_models_without_user_hooks_still_train_on_both_paths():
    """The engine's own dropout hooks sit on its private copy: the user's model gains none, and it can
    be handed to the grouped path after the vmap path and the per-client loop used it."""
    import torch

    from fedlib.engines.grouped import registered_hooks
    from fedlib.engines.stacked import StackedEngine, max_relative_difference, reference_run
    from fedlib.models import vgg11

    model, data, run = _hook_setup(None, dropout=True)
    ref = reference_run(model, data, run, rounds=1, batch_size=4, augment=False, padding=0)
    vmap = StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    assert registered_hooks(model) == []
    grouped = StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)
    for engine in (vmap, grouped):
        engine.train()
        assert max_relative_difference(engine.params(0), ref.state.params) < 1e-12
    assert registered_hooks(vgg11(width=1 / 32)) == []
    hooked, _, _ = _hook_setup("pre")
    assert [h[:3] for h in registered_hooks(hooked)] == [("5", "Linear", "forward pre-hook")]


@pytest.mark.parametrize("kind", ["register_hook", "register_post_accumulate_grad_hook"])
def test_gradient_hooks_on_parameters_are_refused_by_both_paths_when_built(kind):
    """Before: a hook on a parameter tensor (here one that zeroes layer 3's weight gradient, i.e. freezes it) was
    silently skipped by both paths, and by reference_run too: the engine moved that weight, and the reference check
    agreed to 1e-17 with the run that ignored the hook. ClientOptimizer in a user's own loop runs it (backward())."""
    import torch

    from fedlib.engines.stacked import StackedEngine

    model, data, run = _hook_setup(None)
    if kind == "register_hook":
        model[3].weight.register_hook(lambda grad: grad * 0)
    else:
        model[3].weight.register_post_accumulate_grad_hook(lambda param: param.grad.zero_())
    for path in ("vmap", "grouped"):
        with pytest.raises(ValueError, match=r"^model has parameters with gradient hooks \['3\.weight'\] "
                                             r"\(Tensor\.register_hook or register_post_accumulate_grad_hook\): the "
                                             r"stacked engines differentiate copies of the parameters, so such a hook "
                                             r"would silently not run"):
            StackedEngine(model, data, [run], dtype=torch.float64, path=path, **_ENGINE)

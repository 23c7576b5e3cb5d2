"""Mutation-testing pass on the argument-agreement checks (:func:`fedlib._validate.mismatch`, ``check_agree``,
``_plural``, the ``size_of=`` of the array checks and their callers), ``bool_entry``'s type checks, and the checks
of what an extension of fedlib gives (an own server optimizer's dtypes, an own sampler's arity, an own step's None
state fields, ``speedup.replicate``'s local work). Each test pins a behaviour that a mutant changed without any other
test failing, or (the review) fails on the code before its fix. Expected values are worked by hand.

Pass of 7f2cdb2..3c92ce0 (pass described in tests/README.md, Mutation passes).

Review fix (fails before): an own server optimizer was refused for a dtype it did not change. With float64 gradients
for a float32 model the clients' models and the aggregated change are float64, and fedlib's own servers go on in
float64; an own server doing plain's ``params + change`` was refused ('update must return new_params in the dtypes
of state.params: leaf 0 is float64, state.params holds float32'), blamed for the widening the gradients made. Now
the dtype of ``state.params + change`` is taken too (test_an_own_server_keeping_the_changes_wider_dtype_is_taken).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.schedules import FixedSteps
from fedlib.server import ServerOptimizer
from fedlib.solvers import sgd
from fedlib.tree import tree_map

P = np.array([0.5, 0.3, 0.2])


def _own_plain(change, state, params, lr=None):
    """fedlib.server.plain's step, written as a user would: x + change."""
    return tree_map(lambda x, d: x + d, params, change), state + 1


def _run(server, x0, grad_fn, rounds=2):
    algo = make_algorithm("fednova", sgd(0.1), server=server)
    return run_sequential(algo, {"x": x0}, grad_fn, P, FixedSteps([1, 2, 3]), rounds=rounds).state.params


@pytest.mark.parametrize("x0, wide", [(np.zeros(2, np.float32), np.float64), (torch.zeros(2), torch.float64)])
def test_an_own_server_keeping_the_changes_wider_dtype_is_taken(x0, wide):
    """float64 gradients of a float32 model make the clients' models and the change float64; fedlib's plain server
    goes on in float64, and so must an own server doing the same step (before: refused, 'leaf 0 is float64,
    state.params holds float32'). The two runs (client i's gradient x - i) end on the same model, in float64."""
    def grad_fn(params, client, round_index, step):
        g = params["x"] - client
        return {"x": g.to(wide) if torch.is_tensor(g) else g.astype(wide)}

    mine = _run(ServerOptimizer(lambda params: 0, _own_plain, "own plain"), x0, grad_fn)["x"]
    theirs = _run(None, x0, grad_fn)["x"]
    assert mine.dtype == theirs.dtype == wide
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_an_own_server_narrowing_a_wider_change_is_still_refused():
    """The wider dtype of the change is taken, not any other: float64 params with a float64 change returned in float32
    are refused as before, naming the leaf and both dtypes."""
    def to_float32(change, state, params, lr=None):
        return tree_map(lambda x, d: (x + d).astype(np.float32), params, change), state

    with pytest.raises(ValueError, match=r"^server optimizer 'narrow': update must return new_params in the dtypes of "
                                         r"state.params: leaf 0 is float32, state.params holds float64 \(the run"):
        _run(ServerOptimizer(lambda params: 0, to_float32, "narrow"), np.zeros(2),
             lambda params, client, r, s: {"x": params["x"] - client})

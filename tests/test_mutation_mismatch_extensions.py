"""Mutation-testing pass on the argument-agreement checks (:func:`fedlib._validate.mismatch`, ``check_agree``,
``_plural``, the ``size_of=`` of the array checks and their callers), ``bool_entry``'s type checks, and the checks
of what an extension of fedlib gives (an own server optimizer's dtypes, an own sampler's arity, an own step's None
state fields, ``speedup.replicate``'s local work), and ``LocalSolver.update``'s refusal of gradients that would widen
the model's dtype. Each test pins a behaviour that a mutant changed without any other test failing, or (the review)
fails on the code before its fix. Expected values are worked by hand.

Pass of 7f2cdb2..3c92ce0 (pass described in tests/README.md, Mutation passes).

Review fix (fails before): an own server optimizer was refused for a dtype it did not change. With float64 gradients
for a float32 model the clients' models and the aggregated change are float64, and fedlib's own servers go on in
float64; an own server doing plain's ``params + change`` was refused ('update must return new_params in the dtypes
of state.params: leaf 0 is float64, state.params holds float32'), blamed for the widening the gradients made. Now
the dtype of ``state.params + change`` is taken too (test_an_own_server_keeping_the_changes_wider_dtype_is_taken,
commit 36c074b).

98 mutants, one at a time (string replacement matched once, ``git checkout`` of the file after, ``git status`` clean
between), ``pytest -x`` on tests/test_mismatched_arguments.py, test_extensions.py, test_validate.py,
test_bad_inputs_core.py, test_wrong_object_inputs.py, this file, and the module's test files and ``test_mutation_*``
files: 74 killed by the suite, 19 killed here, 4 equivalent, 1 alive.
  V1-V3 ``bool_entry``'s fast path (np.bool_ passed as a number, a Python bool passed as an int, numpy numbers left to
  the array probe); V4-V7 ``_plural`` (plural for 1, "entrie", "clients" kept, the space dropped); V8-V11 ``mismatch``
  (no plural, ``ref_what`` always plural, "has" for ``count=True``, the two names swapped); V12, V13 ``check_agree``'s
  ``!=`` as ``<`` / ``>``; V14-V19 ``size_of=`` (the check dropped in check_weights / check_int_array, not passed on by
  check_probability_vector / check_local_steps, the names swapped, the size off by one); TH1-TH11 theory (chi_square's
  ``size_of`` "w" or none, fedprox_weights' "local_steps", e's rows read from its columns, a 1-d e taken, e's d
  unchecked, p / local_steps of _check_quadratic without or with the wrong ``size_of``, lemma1_small_lr_limit's
  "p", b of any rank up to 2, M's rows without "rows"); QP1-QP3 random_quadratic's p (check inverted, ``count=False``,
  ``np.size(p)`` before checking p); SA1-SA3, SA6 (nargs=2, no arity check, no ``return`` after a scheme name,
  a_norms and p swapped); AN1-AN3 relative_error (sizes for shapes, "shapes", the shapes swapped); TE1-TE4, TE6-TE8
  tree ops (the shapes from the wrong operand, names ("b", "a"), tree_axpy as "a"/"b", RuntimeError not caught,
  tree_vdot unchecked, tree_add through tree_map, tree_sub's names swapped); OP1, OP3, OP4 average_buffers (names
  swapped, no check, a zero sum taken); DC2-DC5 FederatedDataset ("its train x" for the test part, the width's
  reference always client 0's train x, no "rows", an empty x as the reference); SY1-SY3 synthetic; LG1, LG2, LG4,
  LG5 LogisticRegression (no clients check, no "per client", y's clients from its last axis, x's rows from axis 0);
  CU1-CU5 TensorEngine / train_clients (names swapped, 2-d labels, an empty client, client 0 named, "rows" for
  "samples"); VA1, VA2 control_variates (m compared with itself, the old size check); SP1, SP2 replicate (no
  clients check, ``!=`` as ``<``); SO1, SO2 _probe_failed (``solver is None``, the unit probe's update without the
  solver); AL2, AL9 the own-server dtype check (for fedlib's servers only, leaf k + 1): killed by the suite.
  AL6, AL7 (mutants of the review fix: the change's wider dtype not taken; torch's promotion not computed): killed by
  test_an_own_server_keeping_the_changes_wider_dtype_is_taken. AL8, AL10 (the wider dtype computed from new_params
  instead of the change: any widening taken): test_an_own_server_widening_the_model_without_cause_is_refused. AL3
  (the first leaf alone compared): test_every_leaf_of_an_own_servers_model_keeps_its_dtype. AL4, AL5 (a leaf
  without a dtype compared; float64 hid them, numpy reads ``dtype == None`` as ``dtype == float64``):
  test_an_own_server_returning_numbers_for_0d_leaves_is_taken. TH13 (lemma1_fixed_point's local_steps without
  ``size_of``): test_lemma1_fixed_point_names_local_steps_and_e. SA5 (a 0-d a_norms taken for one client):
  test_a_0d_a_norms_is_refused_even_for_one_client. TE5 (no re-raise when the shapes agree: the leaf became None):
  test_a_leaf_operation_failing_on_equal_shapes_raises_its_own_error. DC1 (a 0-d y let through to ``y.shape[0]``):
  test_a_0d_label_array_keeps_its_shape_message. LG3, LG6 (a y / an x of too many dimensions let through to the size
  checks): test_logistic_arrays_of_the_wrong_rank_keep_their_own_messages. VA3 (the size check after VRLSGD's
  return): test_vrlsgd_control_variates_refuse_a_p_of_another_size_too. SO3-SO7 (the linearity probe, the init probe
  and the weight-decay probe without the solver; momentum's value shown for mu and mu's for momentum):
  test_every_probe_names_the_none_fields_of_inits_state.
  Equivalent: TH12 (M.shape[1] for n: M is square, checked before); SA7 (``len(a)`` for ``a.size``: a is 1-d there);
  OP2 (``len(w)`` for ``w.numel()``: w is flattened to 1-d); AL1 (fedlib's own servers checked too: they return
  state.params' dtype or its promotion with the change, run on numpy float32 / float16 / 0-d / scalar and torch
  float32 / bfloat16 params for plain, momentum and adam).
  Alive without a test: SA4 (check_sampling's clients_per_round refusal before the arity check): a sampler of the
  wrong arity given with clients_per_round is refused either way, for one of its two mistakes; the order is no
  contract.

Pass of 3c92ce0..66974ab (pass described in tests/README.md, Mutation passes): ``_refuse_widening`` and its two call
sites in ``LocalSolver.update`` (WD*), rule's ``size_of=`` for local_steps (RL*), LogisticRegression's ``plain()`` in
the bool-label message (LB*), an own server's dtype check taking the change's promoted dtype (AS*).

Review fix (fails before; commit c0b5fd3): the widening check refused by mistake a numpy number (np.float64,
np.float32, a 0-d array) as the gradient of a 0-d torch leaf (a TypeError from torch.promote_types; taken before the
check, the leaf keeping its dtype) and big-endian numpy parameters with native gradients of their dtype ('a leaf is
float64 but the parameter is >f8: the step would turn the model into float64'); it did not hold complex torch
parameters (is_floating_point() is False for complex), where it held numpy's
(test_a_numpy_number_for_a_0d_torch_leaf_is_taken, test_parameters_in_the_other_byte_order_take_native_gradients,
test_torch_complex_parameters_are_held_to_their_dtype_as_numpys_are).

43 mutants, one at a time (string replacement matched once, ``git checkout`` of the file after, ``git status`` clean
between), ``pytest -x`` on tests/test_solvers.py, test_extensions.py, this file, test_mismatched_arguments.py,
test_rule.py, test_logistic.py, test_mutation_solvers_schedules_sampling.py, test_mutation_rule_server_variance.py,
test_mutation_logistic_data.py, test_mutation_algorithms_tree_rng.py, test_bad_inputs_core.py,
test_wrong_object_inputs.py, test_bad_inputs.py, test_algorithms.py, test_reference_engine.py, test_server.py,
test_mutation_reference.py, test_mutation_batched_reference.py and test_optim.py: 20 killed by the suite, 12 killed
here (4 by the review fix's tests), 9 equivalent, 2 alive.
  WD3 (the check off: return when the dtypes differ), WD7 (torch's floating-point parameters not held, complex only),
  WD9 (torch's ``!=`` as ``==``), WD10 (torch's new dtype the gradient's, not the promotion), WD12 (the message's
  dtypes swapped), WD16 (numpy integer parameters held: "fci"), WD19 (numpy's two comparisons joined by ``or``),
  WD20 (numpy's promotion of the gradient's dtype with itself), WD22, WD23, WD24 (the fast path's check dropped,
  ``is not`` as ``is``, its arguments swapped), WD26, WD27 (the tree path's check dropped, its arguments swapped);
  RL1-RL4 (fednova_weights' / effective_weights' ``size_of`` dropped or naming the other weights); LB1 (the flag
  shown without plain()), LB3 (y shown for the flag); AS4 (the change's dtype offered where it is state.params'):
  killed by the suite.
  WD5 (torch's branch without ``isinstance(gd, torch.dtype)``): test_a_numpy_number_for_a_0d_torch_leaf_is_taken.
  WD6 (torch's complex parameters not held), WD11 (torch's message naming the gradient's dtype as the model's new
  one): test_torch_complex_parameters_are_held_to_their_dtype_as_numpys_are. WD17 (the native-order comparison
  dropped): test_parameters_in_the_other_byte_order_take_native_gradients. WD8 (torch integer parameters held):
  test_integer_torch_starting_points_become_float_as_numpys_do. WD15, WD21 (numpy's complex parameters not held; the
  message naming the gradient's dtype): test_numpy_complex_parameters_are_held_to_their_dtype. WD28 (the tree path
  skipping 0-d leaves): test_0d_leaves_are_held_to_their_dtype_too. AS1 (a change of another leaf count zipped as it
  is: leaves past its end unchecked): test_a_change_of_another_structure_gives_no_leaf_a_wider_dtype. AS3 (the
  message without the change's wider dtype): test_a_refused_dtype_names_the_changes_wider_one_too. AS6 (numpy's
  DTypePromotionError not caught): test_a_change_whose_dtype_does_not_promote_leaves_the_dtype_message. AS7 (the
  change's own dtype taken for its promotion with state.params):
  test_a_narrower_change_does_not_license_a_narrower_model.
  Equivalent: WD1 (a gradient without a dtype not returned on at once: neither branch takes a None dtype); WD2 (no
  return for equal dtypes: the promotion of a dtype with itself is itself, in native order); WD13 (numpy's ``elif``
  as ``if``: a torch dtype is no np.dtype); WD18 (``to != xd and`` dropped: np.promote_types answers in native order,
  so ``to != xd`` holds wherever ``to`` differs from xd's native form); WD25 (the fast path's ``is not`` as ``!=``:
  equal dtypes in two objects return at once); RL5 (a.size for p.size: _check_a_norms has matched them in both
  callers); LB2 (``!r`` dropped: bool_entry gives Python or numpy bools, plain() Python's, whose str is their repr);
  AS2 (state.params' dtypes for a change of another leaf count: their promotion with themselves offers no wider
  dtype, as None); AS5 (np.promote_types for np.result_type: the same for two dtypes).
  Alive without a test: WD4 (the torch branch chosen by the gradient) and WD14 (numpy's branch without
  ``isinstance(gd, np.dtype)``) differ only for a 0-d torch gradient of a numpy leaf, a kind mismatch the kind check
  lets through for 0-d gradients: an AttributeError / TypeError in the check where the step raised numpy's TypeError
  (a 0-d array) or made the leaf a torch tensor (a numpy number); neither outcome is a contract.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from fedlib.algorithms import apply_server_optimizer, make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.schedules import FixedSteps
from fedlib.server import ServerOptimizer, plain
from fedlib.solvers import LocalSolver, check_own_step, sgd
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
    """A change wider than the model (float64 for float32 params: client updates built by hand from float64 models;
    the local step refuses gradients that would widen the model) makes fedlib's plain server return float64, and an
    own server doing the same step is taken too (before: refused, 'leaf 0 is float64, state.params holds float32').
    Both end on the same model, in float64."""
    state = make_algorithm("fednova", sgd(0.1)).init({"x": x0}, num_clients=3)
    change = {"x": (x0 + 1).to(wide) if torch.is_tensor(x0) else (x0 + 1).astype(wide)}
    mine = apply_server_optimizer(ServerOptimizer(lambda params: 0, _own_plain, "own plain"), change,
                                  state._replace(server=0), 0.1)[0]["x"]
    theirs = apply_server_optimizer(plain(), change, state, 0.1)[0]["x"]
    assert mine.dtype == theirs.dtype == wide
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_gradients_that_would_widen_the_model_are_refused_before_the_server_sees_them():
    """float64 gradients of a float32 model: refused by the local step, naming grad_fn's call (before: the clients'
    models, the change and the global model went float64 without a word)."""
    def grad_fn(params, client, round_index, step):
        return {"x": (params["x"] - client).astype(np.float64)}

    with pytest.raises(ValueError, match=r"grad_fn\(params, client=0, round=0, step=0\) returned dict gradients that do "
                                         r"not fit \(grads: a leaf is float64 but the parameter is float32"):
        _run(None, np.zeros(2, np.float32), grad_fn)


def test_an_own_server_narrowing_a_wider_change_is_still_refused():
    """The wider dtype of the change is taken, not any other: float64 params with a float64 change returned in float32
    are refused as before, naming the leaf and both dtypes."""
    def to_float32(change, state, params, lr=None):
        return tree_map(lambda x, d: (x + d).astype(np.float32), params, change), state

    with pytest.raises(ValueError, match=r"^server optimizer 'narrow': update must return new_params in the dtypes of "
                                         r"state.params: leaf 0 is float32, state.params holds float64 \(the run"):
        _run(ServerOptimizer(lambda params: 0, to_float32, "narrow"), np.zeros(2),
             lambda params, client, r, s: {"x": params["x"] - client})


def test_an_own_server_widening_the_model_without_cause_is_refused():
    """AL8, AL10 (the widening taken as that of state.params with new_params, not with the change): float32 params
    and float32 gradients make a float32 change; an own server returning float64 moves the run to float64 without a
    word, and is refused."""
    def to_float64(change, state, params, lr=None):
        return tree_map(lambda x, d: (x + d).astype(np.float64), params, change), state

    with pytest.raises(ValueError, match=r"^server optimizer 'widen': update must return new_params in the dtypes of "
                                         r"state.params: leaf 0 is float64, state.params holds float32 \(the run"):
        _run(ServerOptimizer(lambda params: 0, to_float64, "widen"), np.zeros(2, np.float32),
             lambda params, client, r, s: {"x": params["x"] - np.float32(client)})


def test_every_leaf_of_an_own_servers_model_keeps_its_dtype():
    """AL3 (the first leaf alone compared): the second leaf returned in float32 for float64 params is refused, by its
    index."""
    def second_to_float32(change, state, params, lr=None):
        new = tree_map(lambda x, d: x + d, params, change)
        return {"a": new["a"], "b": new["b"].astype(np.float32)}, state

    algo = make_algorithm("fednova", sgd(0.1), server=ServerOptimizer(lambda params: 0, second_to_float32, "second"))
    with pytest.raises(ValueError, match=r"^server optimizer 'second': .* leaf 1 is float32, state.params holds float64"):
        run_sequential(algo, {"a": np.zeros(2), "b": np.zeros(3)},
                       lambda params, client, r, s: {k: v - client for k, v in params.items()}, P,
                       FixedSteps([1, 2, 3]), rounds=1)


@pytest.mark.parametrize("x0, as_returned", [
    (np.array(0.5, np.float32), float),  # AL4: a Python float for a 0-d float32 array (no dtype: not compared)
    (0.5, np.float32),                   # AL5: a numpy float32 for a Python float leaf (state.params has no dtype there)
    (np.float32(0.5), np.float32),       # a numpy scalar of the params' own dtype
])
def test_an_own_server_returning_numbers_for_0d_leaves_is_taken(x0, as_returned):
    """A leaf without a dtype on either side (a Python number) is not compared: an own server returning Python floats
    or numpy scalars for 0-d leaves runs as fedlib's plain server does (gradient x - i of client i: the two runs end
    on the same number, to float32's precision). float32, not float64: numpy reads ``dtype == None`` as
    ``dtype == float64``, which hid the mutants for float64 leaves."""
    def numbers(change, state, params, lr=None):
        return tree_map(lambda x, d: as_returned(x + d), params, change), state + 1

    def grad_fn(params, client, round_index, step):
        return {"x": params["x"] - client}

    mine = _run(ServerOptimizer(lambda params: 0, numbers, "numbers"), x0, grad_fn)["x"]
    theirs = _run(None, x0, grad_fn)["x"]
    assert isinstance(mine, as_returned)
    assert float(mine) == pytest.approx(float(theirs), rel=1e-6)


def test_lemma1_fixed_point_names_local_steps_and_e():
    """TH13 (lemma1_fixed_point's local_steps checked without size_of): e of 2 rows with 3 local_steps names both, as
    lemma1_small_lr_limit does (the case of tests/test_mismatched_arguments.py covers the latter only)."""
    from fedlib import theory

    with pytest.raises(ValueError, match=r"^local_steps has 3 clients but e has 2$"):
        theory.lemma1_fixed_point([[1.0], [-1.0]], [0.5, 0.5], [1, 2, 3], 0.5)
    with pytest.raises(ValueError, match=r"^local_steps has 1 client but e has 2$"):
        theory.lemma1_fixed_point([[1.0], [-1.0]], [0.5, 0.5], [1], 0.5)


def test_a_0d_a_norms_is_refused_even_for_one_client():
    """SA5 (only a_norms of more than one dimension refused): a 0-d a_norms has one entry, as p = [1.0] has one client,
    but is not the (m,) vector of norms: refused by its shape, as before the change (shape=p.shape)."""
    from fedlib.sampling import expected_server_weights

    with pytest.raises(ValueError, match=r"^a_norms must have shape \(1,\), got \(\)$"):
        expected_server_weights("uniform", [1.0], 2.0, 1)


def test_a_leaf_operation_failing_on_equal_shapes_raises_its_own_error():
    """TE5 (no re-raise after the shapes were found equal): tree_sub of two bool tensors of one shape fails in torch
    (its NotImplementedError, a RuntimeError), not for their shapes; that error comes through (the mutant returned
    [None] without a word)."""
    from fedlib.tree import tree_sub

    with pytest.raises(RuntimeError, match=r"Subtraction, the `-` operator, with two bool tensors"):
        tree_sub([torch.zeros(2, dtype=torch.bool)], [torch.ones(2, dtype=torch.bool)])


def test_a_0d_label_array_keeps_its_shape_message():
    """DC1 (only y of more than one dimension refused by shape): a 0-d test y is refused as 'y has shape (), expected
    (1,)', not an IndexError from reading its length."""
    from fedlib.data import FederatedDataset

    parts = dict(train_x=[np.zeros((3, 2)), np.zeros((2, 2))], train_y=[np.zeros(3, int), np.zeros(2, int)],
                 test_x=[np.zeros((1, 2)), np.zeros((1, 2))], test_y=[np.array(0), np.zeros(1, int)])
    with pytest.raises(ValueError, match=r"^toy: client 0 test y has shape \(\), expected \(1,\)$"):
        FederatedDataset(**parts, num_classes=2, name="toy")


@pytest.mark.parametrize("x, y, match", [
    # LG3 (a y of too many dimensions let through to the size check): 'y has 1 label but x has 5 rows' blamed the count
    (np.zeros((5, 2)), np.zeros((5, 1), int), r"^y must be integer labels of shape \(5,\), got \(5, 1\) int64$"),
    # LG6 (an x of too many dimensions let through): y was then blamed for x's rank
    (np.zeros((5, 1, 2)), np.zeros(5, int), r"^x must have shape \('B', 2\), got \(5, 1, 2\)$"),
])
def test_logistic_arrays_of_the_wrong_rank_keep_their_own_messages(x, y, match):
    from fedlib.problems.logistic import LogisticRegression

    model = LogisticRegression(num_features=2, num_classes=3)
    with pytest.raises(ValueError, match=match):
        model.grad(model.init_params(), x, y)


def test_vrlsgd_control_variates_refuse_a_p_of_another_size_too():
    """VA3 (the size check after VRLSGD's early return): VRLSGD's mean is 0 whatever p, but a p of 2 clients for
    variates of 3 rows is a mistake all the same, refused as for SCAFFOLD (and as before the change)."""
    from fedlib.variance import control_variates

    with pytest.raises(ValueError, match=r"^p has 2 entries but client has 3 rows$"):
        control_variates(np.ones((3, 1)), [0.5, 0.5], kind="vrlsgd")


@dataclasses.dataclass(frozen=True)
class BufferedStep(LocalSolver):
    """An own step reading the momentum buffer, which LocalSolver.init leaves None without momentum."""

    name: str = "buffered"

    def update(self, state, grads):
        return super().update(state, tree_map(lambda g, u: g + 0.0 * u, grads, state.momentum))


@dataclasses.dataclass(frozen=True)
class ZeroedBuffer(LocalSolver):
    """An own init zeroing the momentum buffer, None without momentum."""

    name: str = "zeroed"

    def init(self, params, correction=None):
        state = super().init(params, correction)
        return state._replace(momentum=tree_map(lambda u: u * 0.0, state.momentum))


@dataclasses.dataclass(frozen=True)
class BufferOnNegative(LocalSolver):
    """Reads the momentum buffer only for a negative gradient entry: the unit-gradient probe (gradients e_k) passes,
    the linearity probe (mixed signs) reaches the None buffer."""

    name: str = "buffer-on-negative"

    def update(self, state, grads):
        if np.any(np.asarray(grads) < 0):
            grads = tree_map(lambda g, u: g + 0.0 * u, grads, state.momentum)
        return super().update(state, grads)


@dataclasses.dataclass(frozen=True)
class DecayTowardsAnchor(LocalSolver):
    """Reads the anchor only with weight decay: the probe without weight decay passes, the weight-decay probe (the
    solver itself) reaches the anchor, None without mu."""

    name: str = "decay-anchor"

    def update(self, state, grads):
        if self.weight_decay:
            grads = tree_map(lambda g, x, a: g + self.weight_decay * (x - a), grads, state.params, state.anchor)
        return super().update(state, grads)


_NONE_FIELDS = (r"LocalSolver\.init leaves the state's momentum buffer None unless momentum > 0 \(here {m}\), its "
                r"anchor None unless mu > 0 \(here {mu}\) and its correction None")


@pytest.mark.parametrize("solver, method, momentum, mu", [
    (BufferedStep(lr=0.1, mu=0.25), "update", "0.0", "0.25"),  # SO4, SO7: each field's own value (both were 0.0)
    (ZeroedBuffer(lr=0.1), "init", "0.0", "0.0"),               # SO5: the init probe
    (BufferOnNegative(lr=0.1), "update", "0.0", "0.0"),         # SO3: the linearity probe
    (DecayTowardsAnchor(lr=0.1, weight_decay=0.01), "update", "0.0", "0.0"),  # SO6: the weight-decay probe
])
def test_every_probe_names_the_none_fields_of_inits_state(solver, method, momentum, mu):
    """Wherever check_own_step's probes meet a None field of LocalSolver.init's state (its own init, the unit-gradient
    steps, the linearity probe, the weight-decay probe), the message names those fields and the solver's momentum and
    mu, not the numpy probe (which the solver accepts)."""
    cls = type(solver).__name__
    with pytest.raises(ValueError, match=rf"^solver: {cls}\.{method} raised TypeError: .*NoneType.* while check_own_step "
                                         rf"probed it; " + _NONE_FIELDS.format(m=momentum, mu=mu)) as info:
        check_own_step("solver", solver)
    assert "accept numpy arrays" not in str(info.value)


# ---------------------------------------------------------------------------------------------------------------------
# Pass of 3c92ce0..66974ab (see the module docstring): the widening check of LocalSolver.update, rule's size_of=.


def test_a_numpy_number_for_a_0d_torch_leaf_is_taken():
    """Review fix (fails before): a numpy number (np.float64 is a Python float; np.float32; a 0-d array) as the
    gradient of a 0-d torch leaf was a TypeError from torch.promote_types (a numpy dtype); torch takes it as a Python
    number and the leaf keeps its dtype, as before the widening check: 1 - 0.1 * 0.5 = 0.95 in float32."""
    solver = sgd(0.1)
    for g in (np.float64(0.5), np.float32(0.5), np.array(0.5)):
        out = solver.update(solver.init({"w": torch.tensor(1.0), "v": torch.zeros(2)}),
                            {"w": g, "v": torch.ones(2)}).params
        assert out["w"].dtype == torch.float32 and out["w"].item() == pytest.approx(0.95)
        torch.testing.assert_close(out["v"], torch.full((2,), -0.1))


@pytest.mark.parametrize("tree", [False, True])  # False: the fast path of a single array
def test_parameters_in_the_other_byte_order_take_native_gradients(tree):
    """Review fix (fails before): big-endian float64 parameters ('>f8', as np.load or a FITS file give) with native
    float64 gradients were refused ('a leaf is float64 but the parameter is >f8: the step would turn the model into
    float64'): the model stays float64 (in native order). A real widening in the other byte order is refused still:
    '>f4' parameters with float64 gradients. x = 1 - 0.1 * 2 = 0.8."""
    def wrap(a):
        return {"w": a} if tree else a

    solver = sgd(0.1)
    out = solver.update(solver.init(wrap(np.ones(2, ">f8"))), wrap(np.full(2, 2.0))).params
    out = out["w"] if tree else out
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.8, 0.8])
    out = solver.update(solver.init(wrap(np.ones(2, ">f4"))), wrap(np.full(2, 2.0, np.float32))).params
    assert (out["w"] if tree else out).dtype == np.float32
    with pytest.raises(ValueError, match=r"^grads: a leaf is float64 but the parameter is >f4: the step would turn the "
                                         r"model into float64;"):
        solver.update(solver.init(wrap(np.ones(2, ">f4"))), wrap(np.full(2, 2.0)))


def test_torch_complex_parameters_are_held_to_their_dtype_as_numpys_are():
    """Review fix (fails before): complex numpy parameters were held to their dtype, torch's not (is_floating_point()
    is False for complex): a complex64 tensor with complex128 or float64 gradients went on in complex128 without a
    word. float32 gradients keep complex64 and pass."""
    solver = sgd(0.1)
    x = {"w": torch.zeros(2, dtype=torch.complex64)}
    for g in (torch.ones(2, dtype=torch.complex128), torch.ones(2, dtype=torch.float64)):
        with pytest.raises(ValueError, match=rf"^grads: a leaf is {g.dtype} but the parameter is torch\.complex64: "
                                             r"the step would turn the model into torch\.complex128;"):
            solver.update(solver.init(x), {"w": g})
    assert solver.update(solver.init(x), {"w": torch.ones(2)}).params["w"].dtype == torch.complex64


def test_integer_torch_starting_points_become_float_as_numpys_do():
    """WD8 (every torch parameter held to its dtype, integers too): an integer starting point is not held (numpy's
    becomes float64, tested in test_solvers); a torch int64 one becomes the gradients' float, 1 - 0.1 * 2 = 0.8."""
    solver = sgd(0.1)
    for dtype in (torch.float32, torch.float64):
        out = solver.update(solver.init({"w": torch.ones(2, dtype=torch.int64)}),
                            {"w": torch.full((2,), 2.0, dtype=dtype)})
        assert out.params["w"].dtype == dtype
        torch.testing.assert_close(out.params["w"], torch.full((2,), 0.8, dtype=dtype))


def test_numpy_complex_parameters_are_held_to_their_dtype():
    """WD15 (complex numpy parameters not held), WD21 (the message naming the gradient's dtype as the model's new
    one): complex64 parameters with complex128 or float64 gradients would go on in complex128, named as such;
    float32 gradients on complex64 and float64 ones on complex128 keep the dtype and pass."""
    solver = sgd(0.1)
    for g in (np.ones(2, np.complex128), np.ones(2)):
        with pytest.raises(ValueError, match=rf"^grads: a leaf is {g.dtype} but the parameter is complex64: the step "
                                             r"would turn the model into complex128;"):
            solver.update(solver.init(np.zeros(2, np.complex64)), g)
    assert solver.update(solver.init(np.zeros(2, np.complex64)), np.ones(2, np.float32)).params.dtype == np.complex64
    assert solver.update(solver.init({"w": np.zeros(2, np.complex128)}), {"w": np.ones(2)}).params["w"].dtype \
        == np.complex128


@pytest.mark.parametrize("x, g", [
    (np.array(1.0, np.float32), np.array(0.5)),            # 0-d arrays
    (np.float32(1.0), np.float64(0.5)),                    # numpy numbers as leaves
    (torch.tensor(1.0), torch.tensor(0.5, dtype=torch.float64)),
])
def test_0d_leaves_are_held_to_their_dtype_too(x, g):
    """WD28 (the tree path's check for leaves with dimensions only): a 0-d float32 leaf with a float64 gradient goes
    float64 all the same (numpy 2 promotes a float64 number; torch promotes among 0-d tensors) and is refused."""
    solver = sgd(0.1)
    with pytest.raises(ValueError, match=r"^grads: a leaf is (torch\.)?float64 but the parameter is (torch\.)?float32"):
        solver.update(solver.init({"w": x}), {"w": g})


def _own_server_on(params, returned, change):
    """apply_server_optimizer with an own server that ignores the change and returns ``returned``."""
    state = make_algorithm("fednova", sgd(0.1)).init(params, num_clients=3)
    return apply_server_optimizer(ServerOptimizer(lambda p: 0, lambda c, s, p, lr=None: (returned, s), "own"), change,
                                  state._replace(server=0), 0.1)


def test_a_change_of_another_structure_gives_no_leaf_a_wider_dtype():
    """AS1 (changes of another leaf count zipped as they are): a change with one leaf for a model of two gives no leaf
    a wider dtype (it would pair the wrong leaves), and the check still reaches leaf 1: float64 for float32 params
    with a float32 change is refused, naming leaf 1."""
    params = {"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)}
    with pytest.raises(ValueError, match=r"^server optimizer 'own': update must return new_params in the dtypes of "
                                         r"state.params: leaf 1 is float64, state.params holds float32 \(the run"):
        _own_server_on(params, {"a": params["a"], "b": params["b"].astype(np.float64)}, np.zeros(2, np.float32))


def test_a_refused_dtype_names_the_changes_wider_one_too():
    """AS3 (the message without the wider dtype): float32 params with a float64 change take float32 or float64; an own
    server returning float16 is refused naming both."""
    with pytest.raises(ValueError, match=r"leaf 0 is float16, state.params holds float32 \(or float64, that of "
                                         r"state.params \+ change\) \(the run would go on"):
        _own_server_on({"x": np.zeros(2, np.float32)}, {"x": np.zeros(2, np.float16)}, {"x": np.ones(2)})


def test_a_narrower_change_does_not_license_a_narrower_model():
    """AS7 (the change's own dtype taken instead of its promotion with state.params): float64 params with a float32
    change stay float64 (float64 + float32 is float64); an own server returning float32 is refused, with no other
    dtype offered."""
    with pytest.raises(ValueError, match=r"leaf 0 is float32, state.params holds float64 \(the run would go on"):
        _own_server_on({"x": np.zeros(2)}, {"x": np.zeros(2, np.float32)}, {"x": np.ones(2, np.float32)})


def test_a_change_whose_dtype_does_not_promote_leaves_the_dtype_message():
    """AS6 (numpy's DTypePromotionError, a TypeError, not caught): a timedelta64 change (finite, so it reaches the
    server) does not promote with float32; the own server's float64 model is refused by the dtype check's message, not
    numpy's promotion error."""
    with pytest.raises(ValueError, match=r"leaf 0 is float64, state.params holds float32 \(the run would go on"):
        _own_server_on({"x": np.zeros(2, np.float32)}, {"x": np.zeros(2)}, {"x": np.ones(2, "m8[s]")})

"""Hand mutation testing of the library changes of 86c5527..90cbd4d (session h): the per-client fast path
``_check_one_client``, ``_validate``'s array-method rewrites and ``check_int_array``'s int64 bound, ``bound_check``'s
momentum refusal, ``plus_minus``'s finite check, ``transposed_markdown_table``'s header, the float32-overflow
messages (``_non_finite``, ``_cast_features``, ``train_clients``), ``tree_index``'s tuple refusal, the round entry
points' ``ServerState`` checks (``_check_state``, ``_check_server_kind``, ``_kept_state_type``, ``_refuse_state``;
algorithms.py and distributed.py), ``summary_lines``' noise-scale bullet (cifar10) and ``sampling_summary``'s
``slope_eff``. One mutant at a time (string replacement, file restored after), ``pytest -x -q`` on
tests/test_hot_paths.py, test_state_checks.py, test_leftovers_dec4h.py, the module's own test files
(e.g. test_algorithms, test_distributed without its multi-process tests, test_bad_inputs_core, test_table1,
test_quadratic_engine, test_custom_model, test_bounds, test_report_tables, test_tree, the earlier test_mutation_*)
and ``tests/test_doctests.py`` for the module.

125 mutants (120 of 90cbd4d, 5 of the fix below): 95 killed by the suite, 22 killed by a test here, 8 equivalent.
One revealed a bug, fixed with its test (C3).

_validate.py (check_finite_array, check_weights, check_int_array):
  V1 ``isfinite(arr).all()`` -> ``.any()``; V2 drop the finite check; V3 ``min() < 0`` -> ``<= 0``; V4 ``min`` ->
  ``max`` (weights); V6 ``(arr != round(arr)).any()`` -> ``.all()``; V7 drop ``dtype.kind != "i"`` (int64 2**63-1
  refused); V8 ``!= "i"`` -> ``== "f"`` (uint64 2**63 wraps); V9 ``>= 2.0**63`` -> ``>``; V11 ``min`` -> ``max`` in
  the lower bound; V12 drop the lower bound; V13 ``min() < minimum`` -> ``<=``; V14 ``min`` -> ``max``; V15
  ``!= "i"`` -> ``!= "u"``: killed by the suite.
  V5 drop ``not isfinite(arr).all() or`` (an inf step count was 'must hold integers below 2**63'; NaN is still
  refused by ``arr != round(arr)``), V10 ``min() < -(2.0**63)`` -> ``<=`` (-2**63, a valid int64, refused): killed
  here.
rule.py / theory.py: R1 ``a.min() <= 0`` -> ``< 0``; R2 ``min`` -> ``max``; Th1 ``.any()`` -> ``.all()``; Th2 drop
  chi_square's infinite check: killed by the suite.
algorithms.py, the per-client fast path (client_init / client_final):
  A1 ``type(client) is int`` -> ``isinstance`` (a bool on the fast path); A2 drop ``type(num_clients) is int`` (a
  4-field state's None); A4 ``client < num_clients`` -> ``<=``; A6 / A7 drop client_init's / client_final's client
  check; A9 drop ``type(state) is not ServerState`` (a tuple: AttributeError); A10 / A11 drop the variates / kind
  clause; A12 the condition -> ``False``; A14 drop client_final's ServerState check: killed by the suite.
  A3 ``0 <= client`` -> ``0 < client`` (client 0 off the fast path), A5 the fast path's ``return`` -> ``pass``,
  A13 client_init's condition -> ``True`` (every state through _check_state): the same answers, only slower;
  killed here by a test that the fast paths are taken (they are the commit's point: 5 % of chapter 10's time).
  A8 ``type(state) is not ServerState`` -> ``not isinstance(...)``: equivalent (a ServerState subclass then skips
  _check_state only where _check_state returns without a word: variates None for an algorithm that keeps none).
_check_state / _refuse_state / server_state_mismatch / apply / apply_server_optimizer / distributed_apply, all
  killed by the suite: S1 drop the ServerState check; S2 ``kind is not None`` -> ``is None``; S3 drop the
  ``return``; S4 drop the ControlVariates check; S5 ``kind is None`` -> ``is not None``; S6 ``!=`` -> ``==``; S7 drop
  the kind check; S8 _AGGREGATION_NAMES swapped; S9 ``ALGORITHMS[...][1]`` -> ``[0]``; S10 the raw aggregation name;
  RS1 the tuple hint for a list; RS2 drop the dict hint; RS3 drop the hint; SM1 the message's parts swapped; SM2 its
  test flipped; AP1 / AP2 apply without _check_state / _check_server_kind; ASO1 / ASO2 apply_server_optimizer
  without its ServerState / kind check; D1 / D2 distributed_apply without either check; D3 another owner named.
_kept_state_type / _check_server_kind:
  K1 the key without the model type; K2 / K3 / K6 the look-up never kept (init every round); K7 ``kinds is None``
  flipped; C2 ``is not`` -> ``is``; C4 saved / kept swapped in the message; C5 apply_server_optimizer named "the
  algorithm's": killed by the suite.
  K4 ``kept = None`` -> ``raise`` when init fails, C1 drop ``kept is not None``: killed here (a server optimizer
  whose init fails on the model is not checked). K5 ``kinds = {}`` -> ``raise`` for an init that takes no weak
  reference (``np.zeros_like``): killed here.
  C3 ``saved is not kept`` -> ``not issubclass(saved, kept)``: killed here, and it showed a bug. The check refused,
  in round 2, the state that a server optimizer of your own had returned in round 1 whenever its type was not the
  one its init made (``None`` until the first update makes a buffer; a ``float`` that becomes a ``numpy.float64``):
  'its server optimizer state (state.server) is a ndarray, but the algorithm's server optimizer keeps a NoneType'.
  Fixed: only fedlib's server states (fedlib.server's types) are told apart by type, on either side. Mutants of the
  fix: C7 only ``kept``'s module asked (a PlainState under your own server passes), C9 ``in`` -> ``not in``, C10
  another module name: killed by the suite; C6 drop the fedlib clause (the bug back), C8 only ``saved``'s module
  asked (your own state under fedlib's momentum passes): killed here.
engines/stacked.py ``_non_finite``: N2 ``isfinite`` negated; N3 ``!=`` -> ``==``; N4 the cast parameter instead of
  the given one: killed by the suite. N1 drop ``source.dtype != dtype``: equivalent (it is called only when the cast
  holds NaN or inf; with the same dtype the source holds them too, so ``isfinite(source).all()`` is False anyway).
experiments/custom.py: CF1 ``>`` -> ``<``; CF2 drop the isfinite test (always raises); CF5 ``any(1)`` -> ``any(0)``;
  CF6 ``_non_finite`` of the cast; CF7 / CF8 features / test features not checked; CF9 ``test_features`` named
  ``features``; TC1 client features not cast; TC2 / TC8 ``_non_finite`` of the cast; TC3 an integer test_x let
  through; TC4 test_x not cast; TC7 test_x's finite check dropped; TC9 the sample row from the uncast features:
  killed by the suite. TC5 the first non-finite test_x row -> the last: killed here.
  CF3 ``finfo(x).max > finfo(dtype).max`` -> ``>=`` and CF4 drop that comparison (every cast checked): equivalent
  (TensorEngine refuses non-finite features and test features before the cast, so a cast that does not narrow is
  finite; only the cost differs). TC6 ``torch.cat(cast)`` -> ``torch.cat(xs)``: equivalent (the engine casts the
  concatenation to the same dtype: float16/32/64 values go up to float64 exactly and are rounded once, as by the
  direct cast, and every value was checked finite in that dtype; only the memory differs).
experiments/bounds.py ``_momentum_of``: B2 drop the refusal; B3 0.5 for sgd too; B4 0.5 -> 0.9; B5 a given momentum
  dropped: killed by the suite. B1 ``momentum is not None`` -> ``momentum`` (0.0 reaches make_solver, whose message
  offers 'momentum-prox', no solver of bound_check's): killed here. B6 ``solver == "sgd"`` -> ``solver !=
  "momentum"``: equivalent (bound_check's solvers are ("sgd", "momentum"), checked before).
report.py: P1 a string read as a number; P4 ``not isfinite`` -> ``isnan``; P5 / P6 the error / the value not
  checked; P8 ``not number >= 0`` -> ``number < 0`` (a NaN error gets the other message); P9 every refusal naming
  ``value``; TM1 / TM2 the header formatted with the cells' spec: killed by the suite.
  P3 drop ``OverflowError`` (an int beyond float's range raised instead of printing), P7 the error checked before the
  value: killed here. P2 bools no longer skipped in _as_number: equivalent (a bool error is refused before; a bool
  value is 0.0 or 1.0, finite).
tree.py: TI1 drop the tuple refusal: killed by the suite. TI2 ``isinstance(i, tuple)`` -> ``type(i) is tuple`` (a
  namedtuple indexes one axis per entry too): killed here. TI3 ``{i!r}`` -> ``{i}``: equivalent (``str`` of a tuple
  is its ``repr``).
experiments/cifar10.py summary_lines: CI1 ``is None`` -> ``is not None``, CI7 the larger of the final and in-round
  difference -> the smaller: killed by the suite. CI2 ``repeats and gaps`` -> ``or``, CI3 -> ``repeats``, CI8 ->
  ``gaps`` (max of nothing), CI4 ``abs`` dropped, CI5 ``or 0.0`` dropped (a repeat without a per-round
  difference), CI6 the largest repeat -> the smallest: killed here.
experiments/speedup.py sampling_summary: SP1 ``is None`` -> ``is not None``; SP2 ``slope`` printed for
  ``slope_eff``; SP3 the ``slope_eff`` part never printed: killed by the suite.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from torch import nn

import fedlib.algorithms as algorithms
from fedlib._validate import check_int_array
from fedlib.algorithms import ClientUpdate, ServerState, make_algorithm
from fedlib.experiments import bounds
from fedlib.experiments import cifar10 as C
from fedlib.experiments.custom import train_clients
from fedlib.report import plus_minus
from fedlib.sampling import full_participation
from fedlib.server import ServerOptimizer, momentum
from fedlib.solvers import sgd
from fedlib.tree import tree_index

P = [0.5, 0.5]
KIND = r"^state: its server optimizer state \(state\.server\) is a "
KEEPS = ", but the algorithm's server optimizer keeps a "
UPDATES = [ClientUpdate(0, np.array([-1.0]), 1.0, 1), ClientUpdate(1, np.array([2.0]), 2.0, 2)]  # change +0.5 a round


def _rounds(algo, state, n):
    for _ in range(n):
        state, _ = algo.apply(state, full_participation(P), UPDATES, 1.0, P)
    return state


# --------------------------------------------------------------------------- _validate
@pytest.mark.parametrize("bad", [[1.0, np.inf], [-np.inf, 1.0]])
def test_check_int_array_calls_an_infinite_count_no_integer(bad):  # V5
    with pytest.raises(ValueError, match=r"^steps must hold integers, got array"):
        check_int_array("steps", np.array(bad), minimum=1)


def test_check_int_array_takes_minus_two_to_the_63():  # V10: the lower bound is int64's own
    assert check_int_array("offsets", np.array([-(2.0 ** 63), 0.0])).tolist() == [-(2 ** 63), 0]


# --------------------------------------------------------------------------- the per-client fast path
def test_client_init_and_final_take_the_fast_path_for_a_plain_int(monkeypatch):  # A3, A5, A13
    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), num_clients=3)

    def slow(*args, **kwargs):
        raise AssertionError("the per-client fast path was not taken")

    monkeypatch.setattr(algorithms, "check_client_indices", slow)
    monkeypatch.setattr(algorithms, "_check_state", slow)
    for client in (0, 2):
        run = algo.solver.update(algo.client_init(state, client), np.ones(2))
        assert algo.client_final(state, client, run).client == client


# --------------------------------------------------------------------------- the server optimizer state's kind
def test_a_server_optimizer_whose_init_fails_on_the_model_is_not_checked():  # K4, C1
    """``_kept_state_type`` is None when init fails (its problem, met where the state is built): the round runs."""
    def init(params):
        raise RuntimeError("this init takes no model")

    counting = ServerOptimizer(init, lambda change, state, params, lr: (params + change, state + 1), "counting")
    algo = make_algorithm("fedavg", sgd(1.0), counting)
    state = _rounds(algo, ServerState(np.zeros(1), 0, None, 0, 2), 2)
    assert state.server == 2 and float(state.params[0]) == 1.0


def test_a_server_optimizer_whose_init_takes_no_weak_reference_is_still_checked():  # K5
    summing = ServerOptimizer(np.zeros_like, lambda change, state, params, lr: (params + change, state + change), "sum")
    algo = make_algorithm("fedavg", sgd(1.0), summing)
    with pytest.raises(TypeError):  # what the look-up's cache meets: np.zeros_like takes no weak reference
        algorithms._KEPT_STATE_TYPE.get(np.zeros_like)
    state = _rounds(algo, algo.init(np.zeros(1), num_clients=2), 2)
    assert float(state.params[0]) == 1.0 and float(state.server[0]) == 1.0
    plain_state = make_algorithm("fedavg", sgd(1.0)).init(np.zeros(1), num_clients=2)
    with pytest.raises(ValueError, match=KIND + "PlainState" + KEEPS
                                         + r"ndarray \('sum';"):
        _rounds(algo, plain_state, 1)


def _lazy_momentum(change, state, params, lr):  # the buffer is made by the first update: init returns None
    buffer = change if state is None else 0.9 * state + change
    return params + buffer, buffer


def _norm_sum(change, state, params, lr):  # init's 0.0 becomes a numpy.float64
    return params + change, state + np.abs(change).sum()


@pytest.mark.parametrize("server", [ServerOptimizer(lambda params: None, _lazy_momentum, "lazy-momentum"),
                                    ServerOptimizer(lambda params: 0.0, _norm_sum, "norm-sum")])
def test_a_server_optimizer_of_your_own_keeps_what_its_update_returns(server):  # C3 (the bug), C6
    """Was: round 2 raised "state: its server optimizer state (state.server) is a ndarray, but the algorithm's server
    optimizer keeps a NoneType" (and "a float64 ... keeps a float"): the state its own update had returned."""
    algo = make_algorithm("fedavg", sgd(1.0), server)
    state = _rounds(algo, algo.init(np.zeros(1), num_clients=2), 3)
    assert state.round == 3 and type(state.server) is not type(server.init(state.params))
    new, _ = algorithms.apply_server_optimizer(server, np.ones(1), state, 1.0)
    assert np.isfinite(new).all()


def test_fedlib_server_states_are_told_apart_on_either_side():  # C3, C7, C8
    """A server of your own whose init makes a plain tuple refuses fedlib's PlainState (a tuple subclass, C3) ...
    and fedlib's momentum refuses a state of your own (C8); a PlainState under your own server is refused (C7)."""
    plain_state = make_algorithm("fedavg", sgd(1.0)).init(np.zeros(1), num_clients=2)
    tupled = ServerOptimizer(lambda params: (), lambda c, s, p, lr: (p + c, s), "tupled")
    with pytest.raises(ValueError, match=KIND + "PlainState" + KEEPS
                                         + r"tuple \('tupled';"):
        _rounds(make_algorithm("fedavg", sgd(1.0), tupled), plain_state, 1)
    own = ServerOptimizer(lambda params: None, _lazy_momentum, "lazy-momentum")
    own_state = _rounds(make_algorithm("fedavg", sgd(1.0), own), make_algorithm("fedavg", sgd(1.0), own).init(
        np.zeros(1), num_clients=2), 1)
    with pytest.raises(ValueError, match=KIND + "ndarray" + KEEPS
                                         + r"MomentumState \('momentum';"):
        _rounds(make_algorithm("fedavg", sgd(1.0), momentum(0.9)), own_state, 1)
    with pytest.raises(ValueError, match=r"is a PlainState, but the algorithm's server optimizer keeps a NoneType"):
        _rounds(make_algorithm("fedavg", sgd(1.0), own), plain_state, 1)


# --------------------------------------------------------------------------- train_clients' test_x
def test_train_clients_names_the_first_bad_row_of_test_x():  # TC5
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 6, generator=g) for n in (5, 7)]
    ys = [torch.randint(0, 3, (n,), generator=g) for n in (5, 7)]
    test_x = torch.randn(4, 6)
    test_x[1, 0] = test_x[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"^test_x holds NaN or inf \(sample 1\)$"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, test_x=test_x, test_y=torch.tensor([0, 1, 2, 0]),
                      dtype=torch.float32)


# --------------------------------------------------------------------------- bound_check's momentum
def test_bound_check_refuses_a_zero_momentum_with_sgd_in_its_own_words():  # B1
    problem, steps = bounds.default_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.0 \(use "
                                         r"solver='momentum'\)$"):
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.0, replicas=1)


# --------------------------------------------------------------------------- plus_minus
def test_plus_minus_prints_an_int_beyond_float_range_as_it_is():  # P3
    big = 10 ** 400
    assert plus_minus(big, 1) == f"{big} ± 1"


def test_plus_minus_names_the_value_first_when_both_are_not_finite():  # P7
    with pytest.raises(ValueError, match=r"^value: plus_minus needs a finite number, got nan$"):
        plus_minus(float("nan"), float("inf"))


# --------------------------------------------------------------------------- tree_index
def test_tree_index_refuses_a_namedtuple():  # TI2: numpy and torch read it as one index per axis as well
    Pair = collections.namedtuple("Pair", "row col")
    for leaf in (np.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4)):
        assert int(leaf[Pair(1, 2)]) == 6  # what it would have picked: one entry
        with pytest.raises(ValueError, match=r"^i must be a row index .* got the tuple Pair\(row=1, col=2\) \(one"):
            tree_index({"a": leaf}, Pair(1, 2))


# --------------------------------------------------------------------------- summary_lines' noise bullet
GAPS = [{"row": "SGD", "setting": "E=2", "baseline": "FedAvg", "seeds": [0], "baseline_final": 58.82,
         "fednova_final": 66.53, "gap": 7.71, "paper_gap": 5.63}]
NOISE = "- Every FedNova lead above is asserted to exceed the largest difference of a repeat, final or in any round: "


def test_summary_lines_noise_is_the_largest_difference_of_any_repeat():  # CI4, CI5, CI6, CI7
    repeats = [{"cell": "a", "seed": 0, "difference": -1.5, "max_round_difference": None},  # an older repeat file
               {"cell": "b", "seed": 1, "difference": -0.25, "max_round_difference": 0.75}]
    lines = C.summary_lines([], GAPS, [], [], repeats, [])
    assert lines[2] == ("- The same run made twice (a, seed 0) ends 1.50 points apart: differences of that size "
                        "between cells mean nothing.")
    assert lines[-1] == NOISE + "1.50 points."
    assert C.summary_lines([], GAPS, [], [], repeats[1:], [])[-1] == NOISE + "0.75 points."


def test_summary_lines_noise_needs_both_repeats_and_leads():  # CI2, CI3, CI8
    repeats = [{"cell": "a", "seed": 0, "difference": 0.5, "max_round_difference": 0.6}]
    for gaps, reps in ((GAPS, []), ([], repeats)):
        assert not any(line.startswith(NOISE) for line in C.summary_lines([], gaps, [], [], reps, []))

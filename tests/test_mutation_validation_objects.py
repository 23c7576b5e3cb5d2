"""Wrong objects refused by name (``_validate.check_instance`` and its call sites), whole-number counts and their int64
cap (``check_count``, ``_past_int64``, ``check_int_array``, ``parse_epochs``), a bool among numbers (``bool_entry``,
``check_finite_array``), ``run_batched``'s own-step divergence and ``check_participant_steps``' empty clients:
behaviour that the rest of the suite left unpinned.

Review and mutants of f2e2364..7f2cdb2 (pass described in tests/README.md, Mutation passes). Review fixes, each with
a test in tests/test_validate.py that fails before: bool_entry read the dtype of every numpy number in a list (~3 us an
entry, 25 times the search's cost before; cce0461); check_int_array compared a float16 array with 2**63 in float16,
numpy's overflow RuntimeWarning on every call (eac475d). 78 mutants, one at a time (string replacement matched once,
the file restored with ``git checkout`` after, ``git status`` clean between), ``pytest -x`` on
test_wrong_object_inputs.py, test_bad_inputs_core.py, test_bad_inputs.py, test_validate.py and the module's test
files (for _validate.py: test_mutation_results_validate, test_schedules, test_solvers,
test_mutation_solvers_schedules_sampling, test_cli_synthetic, test_algorithms, test_sampling, test_rule,
test_anatomy_tradeoff, test_hot_paths, test_logistic, test_checkpoint, test_theory, test_acceleration). Totals: 61
killed by the suite, 12 killed by a test of the pass (CI2, CC1, CC11, BE1, BE6, BE8, BE9, FA5, RB2, CS6, CS10, CS11),
5 equivalent (CC7, CC10, PI7, IA8, PS2), none left alive. The mutants of check_int_array were run on the code before
eac475d; IA8 is equivalent on it too.

fedlib/_validate.py, check_instance:
  CI1 the test inverted; CI2 returns None, not ``value``; CI3 the class without its module; CI4 the value's repr, not
  its type; CI5 ``type(value) is cls`` (a subclass refused); CI6 the hint dropped; CI7 TypeError, not ValueError.
  killed by the suite: CI1, CI3-CI7. killed here: CI2.
check_count:
  CC1 returns ``number`` (a numpy integer stays one), not ``int(number)``; CC2 returns ``value`` (2.0 stays a float);
  CC3 a bool taken; CC4 ``< minimum`` -> ``<=``; CC5 ``_past_int64(number, 0)``; CC6 the int64 cap dropped; CC7
  ``np.isfinite`` dropped before ``is_integer()``; CC8 ``np.floating`` dropped; CC9 'an integer' in the message; CC10
  the 0-d hint asked of ``number``; CC11 ``_past_int64(value, value)``. killed by the suite: CC2-CC6, CC8, CC9.
  killed here: CC1; CC11 by test_float16_counts_are_taken_without_an_overflow_warning (tests/test_validate.py: a
  float16 count compared with 2**63 in float16 warns). equivalent: CC7 (``float('inf').is_integer()`` and NaN's are
  False: the same refusal), CC10 (``number`` differs from ``value`` only for a whole float, which is no 0-d array:
  ``_held_in_array`` is False for both).
_past_int64:
  PI1 ``>=`` -> ``>``; PI2 ``2 ** 63`` -> ``2.0 ** 63`` in the high bound; PI3 ``<`` -> ``<=``; PI4 the low bound
  dropped; PI5 ``or`` -> ``and``; PI6 ``2 ** 63 - 1``; PI7 ``-(2.0 ** 63)`` in the low bound. killed by the suite:
  PI1-PI6. equivalent: PI7 (``-2**63`` is a float exactly; Python compares an int with a float exactly, and numpy's
  int64 min and uint64 cannot lie below it).
check_int_array:
  IA1 uint64 not capped; IA2 floats not capped; IA3 the low bound of the max; IA4 the high bound of the min; IA5
  IA6 IA7 'integers' in the messages; IA8 int64 arrays capped too. killed by the suite: IA1-IA7. equivalent: IA8 (an
  int64 array lies within the bounds).
fedlib/schedules.py, parse_epochs and check_participant_steps:
  PE1 the cap dropped; PE2 ``lo`` capped, not ``hi``; PE3 named 'high'; PS1 an empty int array on the fast path;
  PS2 the ``clients.size and`` guard put back; PS3 ``>=`` -> ``>``; PS4 a negative client on the fast path. killed by
  the suite: PE1-PE3, PS1, PS3, PS4. equivalent: PS2 (empty clients never reach the line: the fast path asks for a
  size and check_int_array refuses an empty one).
bool_entry:
  BE1 a tuple searched through ``np.asarray(dtype=object)``; BE2 ``isinstance(v, (float, int))`` (a bool skipped as
  an int); BE3 nested lists not searched; BE4 the nested list returned, not its bool; BE5 a bool array among the
  entries not judged; BE6 an empty bool array's first entry read; BE7 ``flat[0]``, not ``.item()``; BE8 an array
  searched; BE9 ``isinstance(v, bool)`` (numpy's bool scalar left to the array branch); BE10 a bool skipped. killed
  by the suite: BE2-BE5, BE7, BE10. killed here: BE1, BE6, BE8; BE9 by
  test_bool_entry_passes_numbers_without_the_array_probe (tests/test_validate.py, the test of cce0461:
  np.False_ came back as the Python False of the array branch, after an is_bool call).
check_finite_array:
  FA1 object arrays not searched; FA2 an int list not searched; FA3 a tuple not searched; FA4 ``if flag:`` (a False
  let through); FA5 an object array's np.bool_ missed; FA6 bool_entry for the object array too. killed by the
  suite: FA1-FA4, FA6. killed here: FA5.
fedlib/engines/batched.py, run_batched:
  RB1 the round t + 1; RB2 a ValueError turned into DivergenceError too; RB3 the local phase outside the try (the
  code before b85aeb6). killed by the suite: RB1, RB3. killed here: RB2.
Call sites:
  CS1 run_sequential's algorithm unchecked; CS2 server_state_mismatch's state unchecked; CS3 its state checked
  before its algorithm; CS4 check_own_step's name 'solver'; CS5 the variance functions' state unchecked; CS6
  run_strategy's clock unchecked; CS7 its clock checked before its problem; CS8 traced_clients without
  num_classes; CS9 GroupedNetwork's model unchecked; CS10 run_setup ``Mapping`` -> ``dict``; CS11 run_seconds
  ``Mapping`` -> ``dict``; CS12 bench_cifar10's data unchecked; CS13 aggregate catches ValueError; CS14
  linearised_vr_matrix asks for a QuadraticProblem; CS15 sampling_bias for a LogisticProblem; CS16 run_quadratic's
  check after ``problem.dim``; CS17 the stacked engine's ``_train_images`` without ``_check_image_data``; CS18
  round_contraction's check dropped; CS19 probe_a_vector's. killed by the suite: CS1-CS5, CS7-CS9, CS12-CS19.
  killed here: CS6, CS10, CS11.
"""
from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest
import torch

from fedlib._validate import bool_entry, check_count, check_finite_array, check_instance
from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.engines.batched import DivergenceError, run_engine
from fedlib.problems.logistic import LogisticProblem
from fedlib.schedules import FixedSteps
from fedlib.solvers import LocalSolver, sgd


@pytest.fixture(scope="module")
def prob():
    return LogisticProblem(synthetic(num_clients=3, seed=1, num_samples=[12, 9, 15]), l2=0.001)


# ----------------------------------------------------------------------------- check_instance, check_count
def test_check_instance_returns_what_it_was_given():
    """check_instance returns ``value`` (its docstring), a subclass's instance included, so that a caller can check
    and bind in one line. Kills CI2 (None returned)."""
    class Mine(LocalSolver):
        pass

    solver, mine = sgd(0.1), Mine(lr=0.1)
    assert check_instance("solver", solver, LocalSolver) is solver
    assert check_instance("solver", mine, LocalSolver) is mine


def test_check_count_returns_a_python_int():
    """check_count returns ``int(value)``: a numpy integer or a whole numpy float is a Python int after it (an
    np.uint64 count stayed one, whose arithmetic with a negative int is a float in numpy 2's promotion, and an
    np.int8 one wraps at 127). Kills CC1 (``number`` returned: the numpy integer as it came)."""
    for value, want in ((np.int64(3), 3), (np.uint64(5), 5), (np.int8(7), 7), (np.float32(2.0), 2), (4, 4)):
        got = check_count("tau", value, minimum=1)
        assert type(got) is int and got == want


# ----------------------------------------------------------------------------- bool_entry, check_finite_array
def test_a_tuple_holding_a_bool_tensor_among_numbers_is_refused_as_a_list_is():
    """A tuple is searched entry by entry as a list is: a 0-d bool tensor among its numbers is found by its dtype
    (check_finite_array refuses it by name) and a tuple of arrays of other shapes holds no bool. Kills BE1 (a tuple
    read by ``np.asarray(values, dtype=object)``: the tensor stays an object, no bool, and (0.5, True-tensor) was the
    weights [0.5, 1.0]; the ragged tuple raised numpy's 'could not broadcast')."""
    for value in ((torch.tensor(True), 0.5), [torch.tensor(True), 0.5]):
        with pytest.raises(ValueError, match=r"^w must be an array of numbers: got a bool \(True\) among its entries"):
            check_finite_array("w", value)
    assert bool_entry((np.zeros((2, 2)), np.zeros((2, 3)))) is None
    assert bool_entry((np.zeros((2, 2)), (np.zeros((2, 3)), np.ones(1, dtype=bool)))) is True


def test_bool_entry_an_empty_bool_array_holds_no_bool():
    """An empty bool array among the entries has no first entry: no bool (None), not an IndexError; check_finite_array
    takes the empty arrays as numbers. Kills BE6 (``flat[0]`` read without ``len(flat)``)."""
    assert bool_entry([np.zeros(0), np.zeros(0, dtype=bool)]) is None
    assert bool_entry([0.5, [torch.zeros(0, dtype=torch.bool)]]) is None
    assert check_finite_array("w", [np.zeros(0), np.zeros(0, dtype=bool)]).shape == (2, 0)


def test_bool_entry_does_not_search_an_array_or_tensor():
    """``values`` an array or tensor: None whatever it holds (its dtype tells; is_bool's work), and no walk over its
    numbers. Kills BE8 (an array searched as an object array: a bool array gave True, and every number of a large
    array became a Python object)."""
    for values in (np.array([True, False]), np.array([0.5, 1.0]), torch.tensor([True]), np.array(True)):
        assert bool_entry(values) is None


def test_check_finite_array_refuses_a_numpy_bool_in_an_object_array():
    """An object array holding numpy's bool among numbers is refused as one holding Python's: np.True_ would count
    as 1.0. Kills FA5 (the object array searched for ``bool`` alone: np.array([0.5, np.True_], dtype=object) was
    [0.5, 1.0])."""
    for flag in (np.True_, np.False_):
        with pytest.raises(ValueError, match=rf"^p must be an array of numbers: got a bool \({flag}\) among its"):
            check_finite_array("p", np.array([0.5, flag], dtype=object))
    assert check_finite_array("p", np.array([0.5, np.float64(0.5)], dtype=object)).tolist() == [0.5, 0.5]


# ----------------------------------------------------------------------------- run_batched's own step
class _RefusingSGD(LocalSolver):
    """An own step that refuses, with a ValueError, a step that left the finite numbers: an error of its own, no
    divergence of the run."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        nx, nu = super()._direction_and_params(x, g, u, x0, corr, lr_k, wd)
        if not np.isfinite(nx).all():
            raise ValueError("my step refuses a learning rate this large")
        return nx, nu


@pytest.mark.parametrize("engine", ["batched", "reference"])
def test_an_own_steps_value_error_goes_through_as_it_is(prob, engine):
    """Only a FloatingPointError of an own step is the round's DivergenceError: a ValueError it raises goes
    through as it is on both engines (it says what the step refused, no divergence). Kills RB2 (``except
    (FloatingPointError, ValueError)``: run_batched made it 'diverged in round 2: my step refuses ...')."""
    algo = make_algorithm("fedavg", _RefusingSGD(lr=0.05))
    with pytest.raises(ValueError, match=r"^my step refuses a learning rate this large$") as info:
        run_engine(engine, algo, prob, FixedSteps([3, 2, 3]), 5, batch_size=4, fast=False,
                   lr_at=lambda t: 0.05 if t < 2 else 1e308)
    assert not isinstance(info.value, DivergenceError)


# ----------------------------------------------------------------------------- call sites
def test_run_strategy_refuses_a_wrong_clock_by_name(prob):
    """run_strategy's clock is checked as its problem is (the scan of test_wrong_object_inputs.py passes a wrong
    problem, which is checked first, so it never reached the clock). Kills CS6 (the clock unchecked:
    AttributeError "'NoneType' object has no attribute 'num_clients'")."""
    from fedlib.experiments.stragglers import run_strategy

    for clock, name in ((None, "NoneType"), ({"speeds": [1.0, 1.0, 1.0]}, "dict")):
        with pytest.raises(ValueError, match=rf"^clock must be a fedlib\.schedules\.WallClock, got {name}$"):
            run_strategy(prob, clock, "wait-for-all", 1, [0])


def test_run_setup_and_run_seconds_take_any_mapping():
    """run_setup's run and run_seconds' result are mappings (their annotations, their messages): a read-only
    mapping gives what the dict gives. Kills CS10 and CS11 (``isinstance(.., dict)``: a MappingProxyType refused
    as 'run must be a mapping' / 'result must be a result document (a mapping ...)')."""
    from fedlib.experiments.cifar10 import run_setup, run_seconds

    run = {"algorithm": make_algorithm("fednova", sgd(0.02, weight_decay=1e-4)), "epochs": "1-3", "seed": 0}
    assert run_setup(MappingProxyType(run)) == run_setup(run)
    assert run_setup(run)["epochs"] == [1, 3] and run_setup(run)["algorithm"] == "fednova"
    doc = {"provenance": {"wall_time_s": 100.0}, "config": {"engine": {"stacked_runs": 4}}}
    assert run_seconds(MappingProxyType(doc)) == run_seconds(doc) == 25.0

"""Mutation-testing pass on ``fedlib/engines/reference.py`` (``run_sequential``, the plain per-client loop):
each test pins behaviour that a surviving mutant changed (its comment names the mutant); the expected
messages are the documented checks of the function's arguments.

Mutants of efe3bcd..52ae29d, run_sequential (pass described in tests/README.md, Mutation passes):
  R1-R7 run_sequential: seed, sampling, grad_fn None, server_state_mismatch, finiteness unchecked; TypeError
        taken as finite; LocalSolver hint dropped.
  killed here: R3, R6.

Mutants of 37f92d9..d2bb791 (fedlib/engines/reference.py) (pass described in tests/README.md, Mutation passes):
  killed by the suite: R1 first_round unchecked; R2 metric_fn probed with 1 argument; R3 only
  initial_state.params checked for grad; R4 first_round always 0; R5 the first metric at round 0; R6 no
  check_participant_steps; R7 / R13 no graph check after a step; R8 _refuse_graph without the grads case; R9
  _refuse_grads without the None case; R10 ``startswith("grads")`` -> ``"grad_fn"``; R11 ``vr = False`` and R14
  solver_at solvers not probed (tests/test_solvers.py).
  killed here: R12 ``except (ValueError, TypeError)`` -> ``except ValueError``.

Mutants of 1112cf7..24d535b (fedlib/engines/reference.py: run_sequential's check_schedule_size) (pass described in
tests/README.md, Mutation passes):
  RS1 the check dropped; RS2 checked only when rounds > 0; RS3 the rounds' owner 'the problem' (run_sequential is
  given p). killed by the suite: RS1, RS3. killed here: RS2.
"""

import numpy as np
import pytest


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
def test_run_sequential_names_a_missing_grad_fn():
    # mutant R3 (grad_fn None let through): failed in round 0 with "'NoneType' object is not callable"
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    with pytest.raises(ValueError, match=r"^grad_fn must be a callable \(params, client, round, step\) -> grads, "
                                         r"got NoneType"):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), np.zeros(2), None, [0.5, 0.5], FixedSteps([1, 1]), 1)


@pytest.mark.parametrize("params", [np.array(["a", "b"]), {"w": None}])
def test_run_sequential_refuses_an_initial_state_of_no_numbers(params):
    # mutant R6 (a TypeError of tree_all_finite taken as finite)
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), 2)._replace(params=params)
    with pytest.raises(ValueError, match=r"^initial_state\.params hold NaN or inf, or are no tree of numbers"):
        run_sequential(algo, None, lambda x, i, t, k: x, [0.5, 0.5], FixedSteps([1, 1]), 1, initial_state=state)


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791 (reference.py)
def test_run_sequential_names_a_grad_fn_returning_none_to_a_solver_that_raises_type_error():
    """A grad_fn without a return statement is named as such also when the solver's own step fails on the None
    with a TypeError (``x - lr * None``), not only with the built-in step's ValueError; mutant R12 (only ValueError
    caught) let "unsupported operand type(s) for *: 'float' and 'NoneType'" through, naming neither grad_fn nor
    the call."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import LocalSolver

    class PlainSGD(LocalSolver):  # its own step: x_{k+1} = x_k - lr g_k, ||a^(k)||_1 = k (plain SGD's counter)
        def update(self, state, grads):
            return state._replace(params=state.params - self.lr * grads, step=state.step + 1,
                                  a_norm=state.a_norm + 1.0)

    def forgot_return(x, client, round_index, step):
        if round_index == 1 and client == 0:
            return None
        return x  # the gradient of ||x||^2 / 2

    algo = make_algorithm("fedavg", PlainSGD(lr=0.5))
    with pytest.raises(ValueError, match=r"^grad_fn returned None \(grad_fn\(params, client=0, round=1, step=0\); "
                                         r"a missing return statement\?\)"):
        run_sequential(algo, np.ones(2), forgot_return, [0.5, 0.5], FixedSteps([1, 1]), 2)
    # the solver itself is fine: one step of lr 0.5 on grad x halves x, each round (every client alike)
    run = run_sequential(algo, np.ones(2), lambda x, i, t, k: x, [0.5, 0.5], FixedSteps([1, 1]), 2)
    np.testing.assert_allclose(run.state.params, [0.25, 0.25])


# -------------------------------------------------------------------- mutants of 1112cf7..24d535b
@pytest.mark.parametrize("rounds", [0, 1])
def test_run_sequential_refuses_a_schedule_of_another_size_even_with_no_round_to_run(rounds):
    """rounds = 0 runs no round, but a schedule for 3 clients where p has 2 is a mistake all the same: refused as with
    rounds = 1 (a wrong seed is too). Mutant RS2 of 1112cf7..24d535b: the size checked only when a round runs."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    with pytest.raises(ValueError, match=r"^schedule is for 3 clients but p has 2$"):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), np.zeros(2), lambda x, i, t, k: x, [0.5, 0.5],
                       FixedSteps([1, 1, 1]), rounds)

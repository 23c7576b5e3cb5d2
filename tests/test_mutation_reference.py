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

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/engines/reference.py, 61c3eb9:
run_sequential's check_round_lr call; RL1-RL14 in tests/test_mutation_solvers_schedules_sampling.py) (pass described
in tests/README.md, Mutation passes):
  RL15 ``solver_at is None`` -> ``is not None``; RL16 ``correction=False``; RL17 algorithm.solver probed for the
  round's solver; RL18 the round named first_round; RL19 a new OwnStepChecks each round; RL20 the probe after the
  round's clients trained (before apply); RL21 the call dropped.
  killed by the suite: RL15, RL17, RL18, RL21. killed here: RL16, RL19, RL20.
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


# ---------------------------------------- mutants of the 8996bdf pass (61c3eb9: run_sequential's check_round_lr)
class _CountedSGD:
    """Own steps (SGD's update) that record (self.lr, ndim of the params, correction given) of every update call;
    ``scale_correction`` adds the control-variate correction times 0.1 / self.lr (right at lr = 0.1 only)."""

    @staticmethod
    def make(scale_correction: bool):
        from fedlib.solvers import LocalSolver

        class Counted(LocalSolver):
            calls: list = []

            def update(self, state, grads):
                Counted.calls.append((self.lr, np.ndim(state.params)))
                if scale_correction and state.correction is not None:
                    state = state._replace(correction=state.correction * (0.1 / self.lr))
                return super().update(state, grads)

        return Counted


def test_run_sequential_probes_a_round_lr_once_with_the_correction_before_its_clients_train():
    """lr_at 0.1 in round 0, then 0.05: run_sequential probes algorithm.solver.with_lr(0.05) once (the calls at 0.05
    are one probe's, counted by check_own_step itself, plus the training's rounds x sum tau_i = 3 x (1 + 3)), with the
    algorithm's correction (SCAFFOLD: an own step that adds twice the correction at 0.05 is refused in round 1), and
    before any client of round 1 trains (grad_fn saw round 0 only). Mutants of the 8996bdf pass: RL14 and RL19 (a
    probe every round), RL16 (the correction not passed on), RL20 (the probe after the round's clients)."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import check_own_step

    decay = lambda t: 0.1 if t == 0 else 0.05  # noqa: E731
    Counted = _CountedSGD.make(False)
    algo = make_algorithm("fednova", Counted(lr=0.1))
    check_own_step("solver", Counted(lr=0.05))
    one_probe = sum(lr == 0.05 for lr, _ in Counted.calls)
    assert one_probe > 0
    Counted.calls.clear()
    run_sequential(algo, np.zeros(2), lambda x, i, t, k: x - i, [0.5, 0.5], FixedSteps([1, 3]), 4, lr_at=decay)
    assert sum(lr == 0.05 for lr, _ in Counted.calls) == one_probe + 3 * (1 + 3)

    Scaled = _CountedSGD.make(True)
    rounds_seen = []

    def grad_fn(x, i, t, k):
        rounds_seen.append(t)
        return x - i

    algo = make_algorithm("scaffold", Scaled(lr=0.1))
    with pytest.raises(ValueError, match=r"^algorithm\.solver\.with_lr\(0\.05\) \(round 1's lr\): Counted is given a "
                                         r"control-variate correction"):
        run_sequential(algo, np.zeros(2), grad_fn, [0.5, 0.5], FixedSteps([1, 3]), 3, lr_at=decay)
    assert set(rounds_seen) == {0}
    run = run_sequential(algo, np.zeros(2), grad_fn, [0.5, 0.5], FixedSteps([1, 3]), 3)  # its own lr: right
    assert run.state.round == 3

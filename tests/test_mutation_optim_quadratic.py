"""Tests written from a mutation-testing pass over ``fedlib.optim`` and
``fedlib.engines.quadratic``: each one checks a documented behaviour that the rest of the
suite left unchecked (a surviving mutant pointed at it). Expected values come from the
docstrings, from hand-checkable arithmetic or from the library's per-client reference
loop (:func:`fedlib.engines.reference.run_sequential`), never from a stored output.

Mutants of 677635c..166b66c, run_replicas (fedlib/engines/quadratic.py) (pass described in tests/README.md,
Mutation passes):
  killed by the suite: Q1 the old name ``"steps"``; Q2 drop ``size=m``.

Mutants of 37f92d9..eb85c03 (fedlib/optim.py) (pass described in tests/README.md, Mutation passes; ids skipped were
drafted and not run):
  killed by the suite: OP1 parameters_of without the Mapping refusal; OP6 ClientOptimizer without the model /
  tensor refusal; OP7 _check_solver_made ``has != keeps`` -> ``has and not keeps``; OP8 the start checked only for
  a given solver (``if not own``); OP9 the correction probe for built-in solvers instead of own steps (killed by
  tests/test_solvers.py); OP11 _check_solver_made without the momentum buffer.
  killed here: OP10 begin copies the start into the parameters before checking it.

Mutants of 37f92d9..d2bb791 (fedlib/engines/quadratic.py) (pass described in tests/README.md, Mutation passes):
  killed by the suite: Q1 gradient_noise's seed / round unchecked; Q2 noisy_grad_fn's local_steps unchecked; Q3
  ``len(solvers) != 1`` -> ``> 2``; Q4 the one solver's number 1; Q5 progress unchecked; Q6 the schedule's steps
  unchecked; Q8 max_steps and dim swapped in the checks.
  killed here: Q7 ``callable(getattr(work, "draw"))`` -> ``hasattr(work, "draw")``.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/problems/quadratic.py)
(pass described in tests/README.md, Mutation passes):
  QP1 _vector without tensor_as_float64; QP2 without the dtype-kind refusal; QP3 eig_range's ndim unchecked; QP4
  random_quadratic's p by np.asarray again; QP5 the semi-definiteness tolerance 1e-10 -> 1e-6. killed by the suite:
  QP1-QP4. killed here: QP5.

Mutants of f9b9704..2e0d04d (fedlib/optim.py: solver_state ends the round; fedlib/engines/quadratic.py: run_replicas'
tau = 0 for a client out of the round) (pass described in tests/README.md, Mutation passes):
  O1 solver_state does not set the flag; O2 begin does not clear it; O3 ``if self._ended`` negated; O4 the flag
  True at construction; O5 begin clears the flag before its checks; O7 the message counts step + 1 (O6 was a syntax
  error, not counted). killed by the suite: O1, O2, O3, O7. killed here: O5. equivalent: O4 (before the first begin
  a step fails in _require_round, and every begin that starts a round clears the flag).
  Q1 ``tau[-1] < 1`` -> ``tau[0] < 1``; Q2 / Q3 a schedule's / a draw's steps minimum 1 again; Q4 the idle client
  looked for among all clients; Q5 a draw named ``work.local_steps``; Q6 ``< 1`` -> ``< 0``; Q7 a draw's steps
  without their minimum 0. killed by the suite: Q1-Q6. killed here: Q7 (a negative count of a client out of the
  round ran as 0).

Mutants of 434c08a (fedlib/engines/quadratic.py: the gradient noise, ``_gradient_noise``'s draw and its use in
run_replicas) (pass described in tests/README.md, Mutation passes): 11 mutants, one at a time, ``pytest -x -q`` on
the 15 files that run run_replicas, gradient_noise or the bounds (test_quadratic_engine.py, this file,
test_bounds.py, test_paper_claims.py, test_experiments_speedup.py, test_engine_differential.py,
test_hot_paths_engines.py, ...) and ``tests/test_doctests.py -k "quadratic or bounds or speedup"``.
  in run_replicas: N1 the round's noise times 0; N2 times 2; N3 the draw of local step 0 used at every step
  (``noise[:, :n, k]`` -> ``noise[:, :n, 0]``); N4 round 0's draw every round. in ``_gradient_noise``: N5 twice
  sigma; N6 zero noise; N7 one draw per replica and client, repeated at every step; N8 sigma times sqrt(d) (the
  bound's sigma for the per-coordinate sigma_0); N9 round 0's generator every round; N10 one draw for every replica;
  N11 uniform on [-1, 1] for the standard normal.
  killed by the suite: N1-N4, N6, N10 (test_quadratic_engine.py::test_run_replicas_equals_reference_loop: the
  reference loop draws with the unmutated gradient_noise, or the replicas' spread), N9
  (test_quadratic_engine.py::test_gradient_noise_stream). killed here: N5, N7, N8, N11 (the reference loop and the
  engine share ``_gradient_noise``; gradient_noise's own tests compare sigma = 0.5 with sigma = 1, a ratio a constant
  factor keeps): test_run_replicas_noise_is_sigma_times_a_fresh_standard_normal_per_step_and_coordinate
  (|mean z^2 - 1.25| = 3.78 on N5 and N8, 0.98 on N7, 0.83 on N11, against a tolerance of 0.119). It kills N1-N3,
  N6 and N10 too, not N4 or N9 (round 0's draw: its run has one round).

Mutants of 94865bc..906afc1 (fedlib/engines/quadratic.py: run_replicas' ``_local_steps`` by runs of equal active
counts with in-place operations, ``_step_sizes``' per-run table, the ``trusted`` draw of a plain RandomLocalWork,
x^(t,0) broadcast, ``np.repeat``; record's distances by ``fedlib.tree._scaled_norm``) (pass described in
tests/README.md, Mutation passes): 34 mutants, one at a time, ``pytest -x -q`` on test_quadratic_engine.py, this
file, test_hot_paths_engines.py, test_bounds.py, test_experiments_speedup.py, test_mutation_speedup_stragglers.py,
test_extensions.py and test_engine_differential.py.
  in ``_local_steps``: RR1 ``active`` by ``side="right"`` (#{tau_i >= k}); RR2 by ``np.arange(1, K + 1)``; RR3
  ``bounds`` without its last ``K`` (the last run dropped); RR4 the run boundaries without ``+ 1``; RR5 ``bounds``
  from 1; RR6 ``n = active[k1 - 1]``; RR7 ``step *= mu_n`` dropped; RR8 ``g += noise`` before ``g -= en``; RR9
  ``us += g`` before ``us *= rho_n``; RR10 rho and mu swapped; RR11 ``lr_cols[k0]`` (the run's first step size
  throughout); RR12 ``lr_cols[k - k0]``; RR13 the steps' columns reversed; RR14 ``x - x`` for ``x - x_start``;
  RR15 ``step -= us``; RR16 the run's first noise throughout; RR17 the boundaries by ``active[1:] < active[:-1]``.
  in run_replicas: RS1 ``x_start = x[None]`` ((1, replicas, d)); RS2 ``x_start`` the local iterates ``xl``; RS3
  ``x_start`` copied; RS4 the table redrawn when it has exactly enough steps (``<=``); RS5 redrawn only when wider
  (``>``); RS6 drawn once (``== 0``); RS7 never kept in the cache; RS8 ``[sol]`` without ``:tau_max``; RS9 the
  participants' solver numbers reversed; RS10 ``isinstance`` for ``type(work) is``; RS11 trusted for any
  ``num_clients``; RS12 for ``num_clients >= m``; RS13 ``if trusted`` for ``if not trusted``; RS14 ``np.asarray``
  of the draw's steps first; RS15 ``u`` of ``x_start``'s shape; RD1 / RD2 record's distance / surrogate distance by
  np.linalg.norm again.
  killed by the suite: RR1-RR5, RR7, RR9-RR16, RS1, RS2, RS5, RS6, RS9, RS13, RS15
  (test_quadratic_engine.py::test_run_replicas_equals_reference_loop; RS13 by
  test_run_replicas_names_the_work_draw_when_it_gives_the_wrong_number_of_steps), RD1, RD2
  (test_a_diverging_runs_distances_are_exact_past_where_the_squared_norm_overflows).
  killed here: RR8 (within the reference loop's 1e-12, not the claimed bits):
  test_run_replicas_local_steps_are_the_recurrence_with_temporaries_to_the_bit; RS4, RS7 (the same numbers, the
  table redrawn): test_run_replicas_step_size_table_is_kept_and_widened_only_for_more_steps; RS10-RS12:
  test_run_replicas_checks_the_draw_of_a_random_local_work_subclass_or_of_one_for_other_clients.
  equivalent: RR6 (``active`` is constant over a run); RR17 (``active`` is non-increasing: tau sorted descending);
  RS3 (``x_start`` is never written); RS8 (the table's columns past tau_max are never read: ``lr_cols[k]``,
  k < tau_max); RS14 (RandomLocalWork's draw is already an int64 array; a draw that is not goes through
  check_int_array).
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from fedlib.algorithms import make_algorithm
from fedlib.engines.quadratic import client_solvers, run_replicas
from fedlib.engines.reference import run_sequential
from fedlib.optim import ClientOptimizer, average_buffers, buffers_of, copy_into, parameters_of
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.solvers import momentum_sgd, sgd

D = torch.float64


def _param(n=3, value=0.0):
    return torch.nn.Parameter(torch.full((n,), value, dtype=D))


# ====================================================================== fedlib.optim
def test_parameters_of_refuses_an_iterable_holding_non_tensors():
    """'an iterable of parameters must hold tensors only' (one non-tensor is enough)."""
    with pytest.raises(ValueError, match="tensors only"):
        parameters_of([1.0, 2.0])
    with pytest.raises(ValueError, match="tensors only"):
        parameters_of([torch.zeros(2), 1.0])


def test_copy_into_checks_the_values_instead_of_broadcasting():
    """copy_into checks count, shapes and dtypes: a (1,) value would otherwise be broadcast
    onto a (3,) parameter by Tensor.copy_ without a word."""
    w = _param()
    with pytest.raises(ValueError, match=r"values\[0\] is torch.float64 \(1,\)"):
        copy_into([w], [torch.ones(1, dtype=D)])
    with pytest.raises(ValueError, match="list of tensors"):
        copy_into([w, _param()], [torch.ones(3, dtype=D), 1.0])  # one non-tensor in the list
    with pytest.raises(ValueError, match="list of tensors"):
        copy_into([w], [1.0])
    assert torch.equal(w.detach(), torch.zeros(3, dtype=D))  # nothing was written
    copy_into([w], [torch.arange(3, dtype=D)])
    assert torch.equal(w.detach(), torch.arange(3, dtype=D))


def test_buffers_of_refuses_a_non_module():
    with pytest.raises(ValueError, match="torch.nn.Module"):
        buffers_of([torch.zeros(2)])


def _bufs(a, n):
    return [torch.tensor([a, -a], dtype=D), torch.tensor(n)]  # a running mean and num_batches_tracked


def test_average_buffers_normalises_the_weights():
    """'weights (normalised to sum 1)': weights 1 and 3 are 1/4 and 3/4; the integer buffer is
    the rounded weighted mean."""
    out = average_buffers([_bufs(4.0, 2), _bufs(8.0, 10)], [1.0, 3.0])
    assert torch.equal(out[0], torch.tensor([7.0, -7.0], dtype=D))  # exact in binary: 1/4 and 3/4
    assert out[1].dtype == torch.int64 and int(out[1]) == 8  # 0.25 * 2 + 0.75 * 10
    # a zero weight is allowed ('>= 0'): that client's buffers take no part
    out = average_buffers([_bufs(4.0, 2), _bufs(8.0, 10)], [0.0, 2.0])
    assert torch.equal(out[0], torch.tensor([8.0, -8.0], dtype=D))
    assert int(out[1]) == 10


@pytest.mark.parametrize("weights, match", [
    ([float("nan"), 1.0], "weights must be 2 finite numbers >= 0 with a positive sum"),
    ([float("inf"), 1.0], "weights must be 2 finite numbers >= 0 with a positive sum"),
    ([-0.5, 1.5], "weights must be 2 finite numbers >= 0 with a positive sum"),
    ([0.0, 0.0], "weights must be 2 finite numbers >= 0 with a positive sum"),
    ([1.0], "^weights has 1 client but client_buffers has 2$")])
def test_average_buffers_refuses_bad_weights(weights, match):
    """'finite numbers >= 0 with a positive sum', one per client (a count of another size names both arguments)."""
    with pytest.raises(ValueError, match=match):
        average_buffers([_bufs(1.0, 1), _bufs(2.0, 2)], weights)


def test_average_buffers_refuses_no_client():
    with pytest.raises(ValueError, match="no client"):
        average_buffers([], [])


def test_properties_before_the_first_round():
    """Before begin(): no step, ||a||_1 = 0, and the solver/lr are the constructor's with the
    group's current lr."""
    opt = ClientOptimizer([_param()], momentum_sgd(0.1, 0.5))
    assert opt.local_steps == 0 and opt.a_norm == 0.0
    assert opt.lr == 0.1 and opt.solver.momentum == 0.5
    opt.param_groups[0]["lr"] = 0.05  # a scheduler stepped between rounds
    assert opt.lr == 0.05 and opt.solver.lr == 0.05 and opt.solver.momentum == 0.5


def test_begin_refuses_a_non_solver():
    opt = ClientOptimizer([_param()], sgd(0.1))
    start = sgd(0.1).init([torch.zeros(3, dtype=D)])
    with pytest.raises(ValueError, match="solver must be a fedlib.solvers.LocalSolver"):
        opt.begin(start, solver=torch.optim.SGD)


def test_begin_checks_the_correction_like_the_parameters():
    """A SCAFFOLD / FedNova-VR correction of another dtype is refused at begin(), not mixed
    into the step by type promotion."""
    opt = ClientOptimizer([_param()], sgd(0.1))
    start = [torch.zeros(3, dtype=D)]
    with pytest.raises(ValueError, match=r"solver_state.correction\[0\] is torch.float32"):
        opt.begin(sgd(0.1).init(start, [torch.ones(3, dtype=torch.float32)]))


def test_sparse_gradient_is_refused():
    w = _param()
    opt = ClientOptimizer([w], sgd(0.1))
    opt.begin(sgd(0.1).init([torch.zeros(3, dtype=D)]))
    w.grad = torch.sparse_coo_tensor([[0]], torch.ones(1, dtype=D), (3,), check_invariants=True)
    with pytest.raises(ValueError, match="sparse gradient"):
        opt.step()


def test_integer_parameter_is_refused_as_such():
    with pytest.raises(ValueError, match="must be floating point"):
        ClientOptimizer([torch.zeros(3, dtype=torch.int64)], sgd(0.1))


def test_load_state_dict_is_refused():
    opt = ClientOptimizer([_param()], sgd(0.1))
    with pytest.raises(NotImplementedError, match="begin"):
        opt.load_state_dict({})



def test_a_refused_begin_leaves_the_round_in_progress_as_it_was():
    """begin checks a round's start before it copies it into the parameters: a start made by another kind of solver
    (here proximal_sgd's, with an anchor, for an optimizer of plain SGD) is refused (ClientOptimizer.begin's
    docstring), and the round in progress goes on from where it was (mutant OP10, ``copy_into`` before the check:
    the refused start (5, 5) was written into the parameters, and the running round's state, which aliases them,
    with it). By hand, lr 0.1 and gradient (1, -1): (1, 2) -> (0.9, 2.1) -> (0.8, 2.2), ||a_i||_1 = 1 then 2."""
    from fedlib.solvers import proximal_sgd

    w = torch.zeros(2, dtype=D, requires_grad=True)
    opt = ClientOptimizer([w], sgd(0.1))
    opt.begin(sgd(0.1).init([torch.tensor([1.0, 2.0], dtype=D)]))
    w.grad = torch.tensor([1.0, -1.0], dtype=D)
    opt.step()
    with pytest.raises(ValueError, match=r"^solver_state has a proximal anchor"):
        opt.begin(proximal_sgd(0.1, 1.0).init([torch.tensor([5.0, 5.0], dtype=D)]))
    assert w.tolist() == pytest.approx([0.9, 2.1], abs=1e-15)
    assert opt.local_steps == 1 and opt.a_norm == 1.0  # not solver_state: reading it ends the round
    opt.step()
    assert w.tolist() == pytest.approx([0.8, 2.2], abs=1e-15)
    assert float(opt.solver_state.a_norm) == 2.0


# ====================================================================== fedlib.engines.quadratic


class _Fixed:
    """Local work with fixed steps and solver numbers; ``as_list`` returns plain lists."""

    def __init__(self, steps, choice, as_list=False):
        self.steps, self.choice, self.as_list = list(steps), list(choice), as_list
        self.calls = []

    def draw(self, t):
        self.calls.append(t)
        if self.as_list:
            return list(self.steps), list(self.choice)
        return np.array(self.steps), np.array(self.choice)

    def local_steps(self, t):
        return np.array(self.steps)


def _prob():
    return random_quadratic(3, 2, seed=4)


def test_client_solvers_draws_once_per_round():
    """'the round's draw is made once, not once per client', and each client gets its solver."""
    a, b = sgd(0.1), momentum_sgd(0.1, 0.5)
    work = _Fixed([1, 2, 3], [0, 1, 0])
    solver_at = client_solvers(work, [a, b])
    for t in range(2):
        assert [solver_at(t, i) for i in range(3)] == [a, b, a]
    assert work.calls == [0, 1]


@pytest.mark.parametrize("kwargs,match", [
    (dict(solvers=[sgd(0.1), sgd(0.1, weight_decay=0.1)]), "weight decay"),   # one solver with weight decay
    (dict(solvers=[sgd(0.1), "sgd"]), "solvers must be"),                        # one non-solver
    (dict(solvers=[sgd(0.05), sgd(0.1)]), "share one base learning rate"),       # ||a_i||_1 in other units
    (dict(rounds=-1), "rounds must be an integer >= 0"),
    (dict(rounds=1.5), "rounds must be an integer >= 0"),
    (dict(replicas=0), "replicas must be an integer >= 1"),
    (dict(seed=-1), "seed must be an integer"),
    (dict(seed=0.5), "seed must be an integer"),
    (dict(rounds=0, sampling="bogus"), "sampling must be one of"),  # refused before any round
    (dict(tau_eff="a_norm"), "'selected_p'"),           # rule.py's policies are not run_replicas' choices
    (dict(tau_eff="local_steps"), "'selected_p'"),
    (dict(rounds=0, tau_eff=0.0), "tau_eff must be a finite number > 0"),   # refused before any round
    (dict(rounds=0, tau_eff=float("nan")), "tau_eff must be a finite number > 0"),
    (dict(rounds=0, tau_eff=True), "tau_eff must be a finite number > 0"),
    (dict(rounds=0, aggregation="fedavg", tau_eff=3.0), "only FedNova"),
])
def test_run_replicas_refuses_bad_arguments(kwargs, match):
    args = dict(problem=_prob(), aggregation="fednova", solvers=[sgd(0.05), momentum_sgd(0.05, 0.5)],
                work=_Fixed([1, 2, 3], [0, 1, 0]),
                rounds=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        run_replicas(**args)


def test_run_replicas_refuses_a_negative_solver_number():
    """'solver numbers must be (m,) in 0..k-1': -1 would silently pick the last solver."""
    with pytest.raises(ValueError, match="solver numbers"):
        run_replicas(_prob(), "fednova", [sgd(0.05), momentum_sgd(0.05, 0.5)], _Fixed([1, 2, 3], [0, -1, 0]), 1)


def test_run_replicas_refuses_non_integer_solver_numbers():
    with pytest.raises(ValueError, match="solver numbers"):
        run_replicas(_prob(), "fednova", [sgd(0.05), momentum_sgd(0.05, 0.5)], _Fixed([1, 2, 3], [0.0, 0.5, 1.7]), 1)


def test_work_may_return_lists():
    """draw(round) -> (steps (m,), solver_numbers (m,)) as plain lists: the same run as arrays."""
    solvers = [sgd(0.05), momentum_sgd(0.05, 0.5)]
    want = run_replicas(_prob(), "fednova", solvers, _Fixed([1, 2, 3], [0, 1, 1]), 3)
    got = run_replicas(_prob(), "fednova", solvers, _Fixed([1, 2, 3], [0, 1, 1], as_list=True), 3)
    np.testing.assert_array_equal(got.params, want.params)


@pytest.mark.parametrize("rounds", [0, 1, 6, 7])
def test_records_against_the_reference_loop(rounds):
    """From x0 != 0: mean_params is the average of x^(t,0) over t >= ceil(T/2) (the start
    itself when T = 0), surrogate_distance has a row per iterate, mean_local_steps is the
    average of the rounds' mean tau_i, progress is called after every round."""
    prob, x0, x_tilde = _prob(), np.array([1.5, -2.0]), np.array([0.25, 0.5])
    work = _Fixed([1, 2, 4], [0, 0, 0])
    seen = []
    run = run_replicas(prob, "fednova", [sgd(0.05)], work, rounds, x0=x0, surrogate=x_tilde, progress=seen.append)
    ref = run_sequential(make_algorithm("fednova", sgd(0.05)), x0, prob.grad_fn(), prob.p, work, rounds,
                         metric_fn=lambda x, t: x.copy())
    xs = np.array(ref.metrics)  # x^(t,0), t = 0..T
    assert xs.shape == (rounds + 1, 2) and run.distance.shape == (rounds + 1, 1)
    np.testing.assert_allclose(run.mean_params[0], xs[math.ceil(rounds / 2):].mean(axis=0), rtol=0, atol=1e-13)
    assert run.surrogate_distance.shape == (rounds + 1, 1)
    np.testing.assert_allclose(run.surrogate_distance[:, 0], np.linalg.norm(xs - x_tilde, axis=1), rtol=1e-12)
    assert (run.mean_local_steps == pytest.approx(7 / 3)) if rounds else math.isnan(run.mean_local_steps)  # no round: no mean
    assert seen == list(range(rounds))


def test_divergence_is_reported_at_the_first_non_finite_replica():
    """'a diverging run is reported, by round': replicas blow up at different rounds (1-d,
    |1 - 0.05 * 100| = 4 per step, the noise sets each replica's size); the error names the
    first round with any non-finite iterate, so a run of that many rounds returns finite ones."""
    prob = QuadraticProblem(np.full((1, 1, 1), 100.0), np.zeros((1, 1)), np.ones(1))
    kw = dict(sigma=1e300, replicas=16, seed=0)
    with pytest.raises(FloatingPointError, match=r"round \d+: the iterate is not finite") as err:
        run_replicas(prob, "fednova", [sgd(0.05)], _Fixed([1], [0]), 100, **kw)
    rounds = int(re.search(r"round (\d+)", str(err.value)).group(1))
    run = run_replicas(prob, "fednova", [sgd(0.05)], _Fixed([1], [0]), rounds, **kw)
    assert np.all(np.isfinite(run.params))
    # |x| near 1e300, x* = 0: its distance is |x| itself, not np.linalg.norm's inf past 1.3e154 (_scaled_norm)
    assert np.array_equal(run.distance[-1], np.abs(run.params[:, 0])) and np.max(run.distance[-1]) > 1e200


# ------------------------------------------------------------------ mutants of 37f92d9..d2bb791 (engines/quadratic.py)
def test_run_replicas_takes_a_schedule_whose_draw_is_no_method():
    """``work`` is read by what it can do: ``draw`` only when it is callable, else ``local_steps(round)`` (with one
    solver). A schedule holding a non-callable attribute named ``draw`` (here the name of how its steps were
    drawn) runs as its ``local_steps`` say, as FixedSteps does; mutant Q7 (``hasattr(work, "draw")``) called
    it: "'str' object is not callable"."""
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    class Recorded:
        draw = "by hand"  # no method: a label

        def local_steps(self, round_index):
            return np.array([1, 3, 2])

    prob = random_quadratic(3, 2, seed=1)
    mine = run_replicas(prob, "fednova", [sgd(0.05)], Recorded(), 3)
    theirs = run_replicas(prob, "fednova", [sgd(0.05)], FixedSteps([1, 3, 2]), 3)
    np.testing.assert_array_equal(mine.params, theirs.params)
    np.testing.assert_allclose(mine.mean_local_steps, 2.0)  # (1 + 3 + 2) / 3 every round


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
def test_quadratic_problem_refuses_an_eigenvalue_below_rounding_of_its_size():
    """QuadraticProblem's positive semi-definiteness check allows rounding, 1e-10 of each H_i's own size, and no
    more: diag(1, -1e-8) is refused (mutant QP5, the tolerance 1e-10 -> 1e-6, took it), diag(1, -1e-12) taken."""
    with pytest.raises(ValueError, match="^H: every H_i must be positive semi-definite; H_0 has the eigenvalue -1e-08"):
        QuadraticProblem(np.array([np.diag([1.0, -1e-8])]), np.zeros((1, 2)), np.array([1.0]))
    QuadraticProblem(np.array([np.diag([1.0, -1e-12])]), np.zeros((1, 2)), np.array([1.0]))


# ====================================================================== f9b9704..HEAD: solver_state ends the round
def test_a_refused_begin_does_not_reopen_a_round_that_solver_state_ended():
    """Reading solver_state ends the round; only a begin that starts the next one clears that. A begin refused
    for its argument (a SolverState of step 1, not a round's start) changes nothing: the next step is still the
    RuntimeError, and the parameter stays where client 0's round left it (SGD lr 0.1 on (w - 1)^2 / 2 from 0:
    one step to 0.1). Kills the mutant that clears the flag at the top of begin, before its checks."""
    w = torch.nn.Parameter(torch.zeros(1, dtype=D))
    algo = make_algorithm("fedavg", sgd(0.1))
    server = algo.init(parameters_of([w]), num_clients=1)
    opt = ClientOptimizer([w], algo.solver)
    opt.begin(algo.client_init(server, 0))
    opt.zero_grad()
    (0.5 * (w - 1.0) ** 2).sum().backward()
    opt.step()
    done = opt.solver_state
    with pytest.raises(ValueError, match=r"^solver_state must be a round's start \(step 0\), got step 1$"):
        opt.begin(done)
    with pytest.raises(RuntimeError, match=r"^step: the round of 1 step\(s\) ended when solver_state was read"):
        opt.step()
    assert w.tolist() == pytest.approx([0.1], abs=1e-15) and opt.local_steps == 1


# ====================================================================== f9b9704..HEAD: run_replicas' steps >= 0
def test_run_replicas_refuses_a_negative_count_for_a_client_out_of_the_round():
    """Steps are whole numbers >= 0 (>= 1 for the round's participants): a draw or schedule giving -1 to a client
    the sampler leaves out is refused by name, 'work.draw(0): steps must be >= 0 for every client (client 1 has
    -1)', not run as if it were 0. Kills the mutant that checks a draw's steps without their minimum."""
    from fedlib.sampling import Participation

    prob = random_quadratic(2, 2, seed=1, p=[0.5, 0.5])

    class Draw:
        def draw(self, t):
            return np.array([2, -1]), np.array([0, 0])

    class Steps:
        def local_steps(self, t):
            return np.array([2, -1])

    only_0 = lambda t: Participation(np.array([0]), np.array([1.0]))  # noqa: E731
    with pytest.raises(ValueError, match=r"^work\.draw\(0\): steps must be >= 0 for every client \(client 1 has -1\)$"):
        run_replicas(prob, "fednova", [sgd(0.05)], Draw(), 1, sampling=only_0)
    with pytest.raises(ValueError, match=r"^work\.local_steps\(0\) must be >= 0 for every client \(client 1 has -1\)$"):
        run_replicas(prob, "fednova", [sgd(0.05)], Steps(), 1, sampling=only_0)


# ------------------------------------------------------------ the gradient noise: mutants of 434c08a
@pytest.mark.parametrize("aggregation", ["fedavg", "fednova"])
def test_run_replicas_noise_is_sigma_times_a_fresh_standard_normal_per_step_and_coordinate(aggregation):
    r"""The noise of a local step is :math:`\sigma_0\xi`, :math:`\xi \sim N(0, I_d)`, a fresh draw at every step
    (the module docstring; chapters 7 and 8 put :math:`\sigma^2 = \sigma_0^2 d` in Theorems 1 and 3). The
    reference-loop tests draw their noise with the same ``gradient_noise``, so a mutant of the draw itself (scaled,
    reused every step, not normal) changes both alike; this test computes the spread by hand instead.

    One client, :math:`F(x) = \tfrac12\|x\|^2` (H = I, e = 0) in d = 4, two SGD steps of :math:`\eta = 1/2` from
    x0, :math:`\sigma_0 = 2`; with one client FedAvg and FedNova both take the client's point (c = 1). A step is
    :math:`x \mapsto x - \eta(x + \sigma_0\xi_k) = x/2 - \xi_k`, so after the round
    :math:`x = x_0/4 - \xi_0/2 - \xi_1`: mean :math:`x_0/4`, each coordinate of variance
    :math:`\eta^2\sigma_0^2(1 + 1/4) = 1.25`. The N = 2000 replicas x 4 coordinates of :math:`z = x - x_0/4` are
    independent N(0, 1.25): :math:`\overline{z^2}` has standard error :math:`1.25\sqrt{2/N} = 0.0198` and
    :math:`\bar z` has :math:`\sqrt{1.25/N} = 0.0125`; both are held to 6 standard errors (0.119, 0.075).
    Mutants of ``_gradient_noise`` that the rest of the suite lets through, and the variance they give: the noise
    doubled (5.0), scaled by :math:`\sqrt d` as if :math:`\sigma` were the bound's :math:`\sigma_0\sqrt d` (5.0),
    one draw per client reused at every step (:math:`x_0/4 - 1.5\,\xi`: 2.25), uniform on [-1, 1] (variance 1/3:
    0.417); zero noise gives 0."""
    from fedlib.schedules import RandomLocalWork

    d, replicas, lr, sigma = 4, 2000, 0.5, 2.0
    problem = QuadraticProblem(H=np.eye(d)[None], e=np.zeros((1, d)), p=np.array([1.0]))
    x0 = np.array([4.0, -8.0, 2.0, 0.0])
    run = run_replicas(problem, aggregation, [sgd(lr)], RandomLocalWork([2], [2]), 1, sigma=sigma, replicas=replicas,
                       seed=0, x0=x0)
    z = run.params - x0 / 4                                   # (1 - eta)^2 x0 = x0 / 4
    n = z.size
    variance = lr ** 2 * sigma ** 2 * (1 + (1 - lr) ** 2)     # 0.25 * 4 * 1.25 = 1.25
    assert abs(np.mean(z ** 2) - variance) < 6 * variance * math.sqrt(2 / n)
    assert abs(np.mean(z)) < 6 * math.sqrt(variance / n)


# ====================================================================== 94865bc..906afc1: the faster run_replicas
def test_run_replicas_local_steps_are_the_recurrence_with_temporaries_to_the_bit():
    r"""``_local_steps`` (in place, the views of each run of steps with the same number of active clients taken
    once) claims the bits of the recurrence written with temporaries, in its order: step k runs the clients with
    :math:`\tau_i > k`, :math:`g = (H_i x - e_i) + \sigma\xi_{i,k}`, :math:`u \leftarrow \rho_i u + g`,
    :math:`x \leftarrow x - s_{i,k}(u + \mu_i(x - x^{(t,0)}))`. The plain loop below is that recurrence; the
    reference-loop tests hold the engine to 1e-12 only, which a reordered sum passes. Random H, e, noise, step sizes,
    momentum and prox, tau = (6, 4, 4, 2, 1) (n_k = 5, 4, 3, 3, 1, 1: runs of 1, 1, 2 and 2 steps), 3 replicas:
    iterates and momentum buffers equal to the bit. Kills RR8 (the noise added before e is subtracted)."""
    from fedlib.engines.quadratic import _local_steps

    rng = np.random.default_rng(4)
    r, q, d = 3, 5, 3
    tau = np.array([6, 4, 4, 2, 1])
    K = int(tau[0])
    H = rng.standard_normal((q, d, d))
    e, noise = rng.standard_normal((q, d)), rng.standard_normal((r, q, K, d))
    lr = rng.uniform(0.01, 0.3, (q, K))
    rho, mu = rng.uniform(0, 0.9, q)[None, :, None], rng.uniform(0, 2, q)[None, :, None]
    x_start = rng.standard_normal((r, 1, d))
    xl, u = np.repeat(x_start, q, axis=1), np.zeros((r, q, d))
    _local_steps(xl, u, x_start, H, e, noise, tau, lr, rho, mu)
    x, v = np.repeat(x_start, q, axis=1), np.zeros((r, q, d))
    for k in range(K):
        n = int(np.sum(tau > k))
        g = np.matmul(H[:n], x[:, :n, :, None])[..., 0] - e[:n] + noise[:, :n, k]
        v[:, :n] = rho[:, :n] * v[:, :n] + g
        x[:, :n] = x[:, :n] - lr[:n, k][None, :, None] * (v[:, :n] + mu[:, :n] * (x[:, :n] - x_start))
    assert np.array_equal(xl, x) and np.array_equal(u, v)
    assert not np.array_equal(xl[:, 0], xl[:, 1])  # the clients did run apart


def test_run_replicas_step_size_table_is_kept_and_widened_only_for_more_steps():
    """``_step_sizes`` keeps the table (solvers x steps) in ``cache[0]``: a round needing no more steps than it holds
    gets the same array back, not a redrawn one; a round needing more gets a wider one, row j solver j's step sizes.
    decayed_sgd(0.5, gamma=0.5): 0.5, 0.25, 0.125, ... (powers of two, exact). Kills RS4 (redrawn when it has
    exactly enough steps) and RS7 (never kept)."""
    from fedlib.engines.quadratic import _step_sizes
    from fedlib.solvers import decayed_sgd

    solvers = [decayed_sgd(0.5, gamma=0.5), sgd(0.5)]
    cache = [np.empty((2, 0))]
    three = _step_sizes(solvers, 3, cache)
    assert three.tolist() == [[0.5, 0.25, 0.125], [0.5, 0.5, 0.5]] and cache[0] is three
    assert _step_sizes(solvers, 3, cache) is three and _step_sizes(solvers, 1, cache) is three
    five = _step_sizes(solvers, 5, cache)
    assert five.tolist() == [[0.5, 0.25, 0.125, 0.0625, 0.03125], [0.5] * 5] and cache[0] is five
    assert _step_sizes(solvers, 4, cache) is five


def test_run_replicas_checks_the_draw_of_a_random_local_work_subclass_or_of_one_for_other_clients():
    """Only a plain RandomLocalWork made for the problem's m clients skips the per-round checks of its draw (its own
    draw gives m int64 steps >= 1 and solver numbers < num_solvers). A subclass's draw is checked: one giving
    solver number -1 (which would index the last solver) or steps 2.5 is refused by name. A RandomLocalWork for 3 or
    1 clients on a 2-client problem is refused naming the count, not run on its first two draws or failing in an
    index. Kills RS10 (a subclass trusted), RS11 (trusted for any number of clients) and RS12 (for more)."""
    from fedlib.schedules import RandomLocalWork

    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))

    class BelowZero(RandomLocalWork):
        def draw(self, t):
            steps, choice = super().draw(t)
            return steps, choice - 1

    class Halves(RandomLocalWork):
        def draw(self, t):
            steps, choice = super().draw(t)
            return steps + 0.5, choice

    with pytest.raises(ValueError, match=r"^work\.draw\(0\): solver numbers must be >= 0 for every client"):
        run_replicas(prob, "fedavg", [sgd(0.5), sgd(0.5)], BelowZero([1, 1], [2, 2]), 1)  # numbers 0 - 1
    with pytest.raises(ValueError, match=r"^work\.draw\(0\): steps must hold whole numbers, got array\(\[2\.5, 2\.5"):
        run_replicas(prob, "fedavg", [sgd(0.5)], Halves([2, 2], [2, 2]), 1)  # steps 2 + 0.5
    for low in ([1, 1, 1], [1]):
        with pytest.raises(ValueError, match=rf"^work\.draw\(0\): steps must have 2 entries \(one per client\), "
                                             rf"got {len(low)}$"):
            run_replicas(prob, "fedavg", [sgd(0.5)], RandomLocalWork(low, [2] * len(low)), 1)

"""Tests written from a mutation-testing pass over ``fedlib.solvers``, ``fedlib.schedules``,
``fedlib.sampling`` and ``fedlib.checkpoint``: each one checks a documented behaviour that the rest
of the fast suite left unchecked (a surviving mutant pointed at it). Expected values come from the
docstrings, the paper and the official code (App. I: momentum 0.9; §6: the learning rate decayed after 50% and 75% of
the rounds, by ÷10 and ÷100 in the official code) or
hand-checkable arithmetic, never from a stored output.

Mutants of 677635c..166b66c, whole_steps and RandomLocalWork (fedlib/schedules.py) (pass described in
tests/README.md, Mutation passes):
whole_steps, all killed by the suite:
  W1 drop the scalar-bool clause; W2 drop the dtype-bool clause; W3 drop the list/tuple clause;
  W4 ``any`` -> ``all`` in the list clause; W5 remove the bool check.
RandomLocalWork, all killed by the suite:
  R1 remove the size check; R2 back to ``check_local_steps("high", high, size=lo.size)``;
  R3 swap the two sizes in the message; R4 ``!=`` -> ``<``.

Mutants of an own step's closed forms (``LocalSolver.a_vector`` / ``a_norm``), of the rangeless pass (described in
tests/README.md, Mutation passes):
  killed here: mutants of the own-step branch, the probe's weight decay, a_norm's online index.

Mutants of 8bd9827.., ``fedlib.solvers`` (check_own_step, builtin_step, STEP_METHODS) and ``fedlib.sampling``
(round_participation, check_sampling) (pass described in tests/README.md, Mutation passes).

Review and mutants of efe3bcd..52ae29d, fedlib/solvers.py, fedlib/schedules.py and fedlib/sampling.py (pass
described in tests/README.md, Mutation passes):
Review fix: as_participation took a bool next to integers ([0, True] is the integer array [0, 1]) as client 1.
  S1-S8 solvers.make_solver: drop the mu check; mu == 0 -> <= 0; drop the momentum check; drop _is_number(mu)
        for prox; ignore the given momentum; momentum-prox without a buffer; drop the name check;
        momentum is not None -> truthy.
  SC1-SC15 schedules: whole_steps work < 0 -> < -1, no finiteness check; WallClock no clip before whole_steps,
        overflow message from the clipped steps, straggler_prob without _is_real / < 1, straggler_factor
        0 <= / without _is_real; step_decay_lr factor without the upper bound / _is_real, milestones without
        the upper bound / 0 excluded / the str test / the list(); _is_real without np.bool_.
  killed here: S2, S8, SC1, SC4, SC15; equivalent: SC14 (np.bool_ is no numbers.Real, so _is_real refuses it
  anyway).

Mutants of 37f92d9..eb85c03, fedlib/solvers.py and fedlib/schedules.py (pass described in tests/README.md, Mutation
passes; ids skipped were drafted and not run):
  SV1 make_solver without the momentum == 0 refusal; SV2 momentum-prox ``mu > 0`` -> ``mu >= 0``; SV4 check_own_step
  a^(1) = 1.0 instead of the probe's; SV5 no _probe_linear; SV6 weight-decay probe on ``< 0``; SV7 correction probe
  on ``not correction``; SV9 _behaviour_key without its ``__slots__`` clause; SV10 OwnStepChecks key without
  ``correction``; SV11 OwnStepChecks.check without the built-in early return; SV12 _probe_linear expects
  ``+lr G a``; SV13 _probe_linear rtol 1e-9 -> 1e-1; SV14 _probe_added_term without a^(1); SV15 weight-decay probe
  of size 1.0, not weight_decay; SV17 momentum-prox without its mu check.
  SC1 check_participant_steps ``own < 1`` -> ``< 0``; SC2 its message names ``k``, not ``clients[k]``; SC5
  round_local_steps' bool test without np.bool_; SC6 no shape check of a listed schedule's counts; SC7 whole_steps
  without the ceil bound; SC8 the bound floor(work) instead of ceil(work); SC9 parse_epochs without its number
  branch; SC10 its count minimum 1 -> 0; SC12 make_epoch_schedule ``int(epochs)`` for a number; SC13
  expected_a_norms without _check_closed_form_subclass; SC14 that check looks at local_steps only; SC15 drop
  ``cls is base`` from its early return.
  killed by the suite: SV1, SV2, SV4-SV7, SV10-SV12, SV14, SV15, SV17, SC1 (the module's doctest), SC5-SC10,
  SC12-SC14. killed here: SV9, SV13, SC2. equivalent: SC15 (for ``cls is base`` every ``getattr(cls, name) is
  getattr(base, name)``, so ``changed`` is empty and it returns anyway).

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/sampling.py)
(pass described in tests/README.md, Mutation passes):
  SA1 sample_with_replacement's weights ``counts / q`` -> ``/ clients.size``; SA2 weights that require grad let
  through; SA3 a numpy string array of weights not searched for text; SA4 bytes not searched; SA5 the pair hint on
  a 3-tuple; SA6 round_participation's messages named 'participation', not the sampler; SA7 expected_server_weights'
  p by np.asarray again; SA8 no 'missing return statement' hint. killed by the suite: SA1, SA2, SA5-SA8. killed
  here: SA3, SA4.

Review and mutants of f9b9704..2e0d04d (fedlib/schedules.py: check_participant_steps' fast path, round_local_steps,
check_epoch_schedule, step_decay_lr; fedlib/solvers.py: check_shared_lr) (pass described in tests/README.md,
Mutation passes):
  review fix (a13fdb4, its test in tests/test_schedules.py): the fast path took a negative count of a client out
  of the round that the checked path refuses.
  SC1 float steps on the fast path; SC2 the fast path without the minimum (the fix undone); SC3 bool clients on the
  fast path; SC4 ``clients.max() >= size`` -> ``>``; SC5 drop ``clients.min() < 0``; SC6 drop ``clients.size``;
  SC7 clients without minimum 0 on the checked path; SC8 round_local_steps' round_index unchecked; SC9 its
  num_clients minimum 0; SC10 check_epoch_schedule's num_samples by np.asarray again; SC11 num_samples minimum 1;
  SC12 check_shared_lr's lr unchecked; SC13 solvers[0].lr checked too; SC14 step_decay_lr names ``lr``; SC15
  ``steps[clients]`` -> ``steps[:0]`` for no client. killed by the suite: SC2 (the fix's test), SC4, SC5, SC8-SC10,
  SC12, SC14. killed here: SC1, SC3, SC7, SC11. equivalent: SC13 (a LocalSolver's lr is checked > 0 when it is
  made), SC15 (both empty). left alive: SC6 (an empty int array of clients gives numpy's 'zero-size array' error
  instead of an empty result; no engine gives a round without participants, round_participation refuses one). No
  test. Later: an empty int array of clients is refused as an empty list is ('clients must be a non-empty 1-d array
  of integers'; it returned an empty array), the fast path asking ``clients.size``; SC6 (now: the fast path without
  it) is killed by test_check_participant_steps_refuses_a_round_without_participants_by_name.

Mutants of 2e0d04d..fb2fbe6 (fedlib/sampling.py: round_participation sorts a sampler's clients; full participation's
seed, round and q checks) (pass described in tests/README.md, Mutation passes):
  S1 not sorted (the sampler's order kept); S2 clients sorted, weights not; S3 ``diff < 0`` -> ``<= 0``; S4 sorted
  descending; S5 unsorted only when clients[0] > clients[-1]. F1 full's seed unchecked; F2 its round unchecked; F3
  ``type(seed) is int`` -> isinstance (True taken); F4 effective_participants takes a q with "full"; F5
  weight_moments does; F6 ``q is not None`` -> ``q``; F7 the fast path's bound 2**129. killed by the suite: S1, S2,
  S4, F1-F5, F7. killed here: S5, F6. equivalent: S3 (repeated clients are refused before, so no difference is 0).

Review and mutants of 0571233~1..165a974 (fedlib/schedules.py: steps_per_epoch's bool entry, FixedEpochs / RandomEpochs'
num_samples as given and their counts by check_count, RandomSteps' low/high stored as ints, make_epoch_schedule's
pair, WallClock.seconds_to_finish's list or tuple as given; fedlib/solvers.py: online_a_norms, run, a_vector,
a_norm by check_count) (pass described in tests/README.md, Mutation passes):
  review: no bug found (2.0, np.float32(2.0) taken as the int 2 and stored as ints; 1.5, NaN, inf, True, a 0-d
  array refused by name; 1e20 taken as the int 10**20, as 10**20 was).
  S1 steps_per_epoch's bool check dropped; S2 FixedEpochs' num_samples by np.asarray again; S3 RandomEpochs' alike;
  S4 FixedEpochs' epochs by check_int; S5 RandomEpochs' low by check_int; S6 its high by check_int; S7 RandomSteps'
  low checked, not stored as int; S8 its high by check_int, not stored; S9 make_epoch_schedule's pair high
  unchecked; S10 its low unchecked; S11 a number epochs by check_int; S12 seconds_to_finish by np.asarray always;
  S13 a list kept as given, a tuple not; S14 a scalar not broadcast; S15 RandomSteps' low minimum 0. SO1-SO4
  online_a_norms, run, a_vector, a_norm by check_int; SO5 online_a_norms minimum 1; SO6 run's checked count not
  assigned. killed by the suite: S1-S9, S11, S12, S14, S15, SO1-SO6. killed here: S10, S13.

Mutants of 1112cf7..24d535b (fedlib/schedules.py: check_schedule_size, _check_has_local_steps, round_local_steps'
owner) (pass described in tests/README.md, Mutation passes):
  SZ1 ``int(k) != num_clients`` -> ``>``; SZ2 a bool num_clients compared; SZ3 numpy integers not compared; SZ4
  check_schedule_size without _check_has_local_steps; SZ5 the counts swapped in the message; SZ6 round_local_steps'
  owner default 'the problem'; SZ7 / SZ8 / SZ9 'p' in the array / None-or-dict / list message whatever the owner;
  SZ10 round_local_steps without _check_has_local_steps; SZ11 ``callable(getattr(...))`` -> ``hasattr``; SZ12
  check_schedule_size's name not passed on; SZ13 num_clients read from FixedSteps only. killed by the suite: SZ1-SZ7,
  SZ10, SZ13. killed here: SZ8, SZ9, SZ11, SZ12.

Mutants of 8fc7fcd..0bee57f (fedlib/sampling.py: weight_moments' presence with replacement by expm1/log1p;
fedlib/solvers.py: the proximal a_vector by _one_minus_alpha_pow, step_size's decayed_sgd underflow message) (pass
described in tests/README.md, Mutation passes):
  SA1 ``1 - (1 - p) ** (q - 1)`` again; SA2 ``log1p(p)``; SA3 exponent q, not q - 1; SA4 ``q > 1`` -> ``q >= 1``
  (q = 1 with p_i = 1: 0 * -inf = NaN); SA5 presence transposed (``p[:, None] * drawn[None, :]``); SA6 the errstate
  around -expm1(...) dropped. OA1 ``(1.0 - alpha) ** n`` again; OA2 the rounding's sign flipped (``alpha - (1 -
  q)``); OA3 ``log1p(e / q)`` -> ``log1p(e)``; OA4 the ``e == 0`` shortcut dropped (alpha = 1: q = 0, e / q a
  ZeroDivisionError); OA5 ``exp((n + 1) ...)``. SS1 ``s == 0`` -> ``s != 0``; SS2 the message for any schedule's 0,
  not only decayed_sgd's; SS3 the message's exponent k + 1; SS4 the message dropped (the old 'lr_schedule(k) must
  be a finite factor > 0').
  killed by the suite: SA1-SA5, OA1, OA2, OA4, SS1-SS4. killed here: SA6, OA3, OA5.

Mutants of 113f0d3..a655138 (fedlib/solvers.py: LocalSolver.__post_init__ storing lr, momentum, mu and weight_decay
as Python floats) (pass described in tests/README.md, Mutation passes):
  LS1-LS4 lr / momentum / mu / weight_decay checked but stored as given; LS5 mu stored from momentum; LS6 lr stored as
  a numpy float32; LS7 weight_decay stored unchecked. killed by the suite: all (test_solvers.py).

Mutants of a655138..81203bf (fedlib/solvers.py, 61091f1: LocalSolver.a_vector with lr_schedule and momentum or prox by
_impulse_response(eta), one backward pass) (pass described in tests/README.md, Mutation passes):
  IR1 step sizes taken in reverse order (the same values); IR2 the plain schedule's ``eta / lr`` -> ``eta * (1 /
  lr)``; IR3 the plain-schedule shortcut for ``rho == 0 or mu == 0``; IR4 the shortcut whatever mu; IR5 rho squared;
  IR6 q_k applied to P before step k's term (P index off by one); IR7 ``1 + eta_k mu``; IR8 the loop stops before k
  = 0; IR9 b stored reversed; IR10 ``b / lr`` -> ``b * (1 / lr)``; IR11 b_tau = 1; IR12 P dropped; IR13 q_k with the
  base lr; IR14 eta reversed; IR15 mu -> alpha; IR16 divided by eta_0; IR17 q of step k - 1.
  killed by the suite: IR1, IR3-IR9, IR11-IR17. killed here: IR2, IR10.

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/solvers.py, 61c3eb9:
OwnStepChecks.check_round_lr; its calls RL15-RL27 in tests/test_mutation_reference.py and
tests/test_mutation_batched_reference.py) (pass described in tests/README.md, Mutation passes):
  RL1 ``lr == base.lr`` -> ``!=``; RL2 base's own lr probed too; RL3 the lower bound 0; RL4 the upper bound dropped;
  RL5 the bounds probed (``1e-200 <= lr <= 1e200``); RL6 the upper bound 1e300; RL8 ``lr <= base.lr`` not probed (a
  decay never); RL9 ``correction=False``; RL10 the name's round t + 1; RL11 the name's lr base's; RL12 ``base``
  probed for ``solver``; RL13 ``lr = base.lr``; RL14 check_own_step uncached (every round probes again). (No RL7:
  dropped before the run, RL5 again.)
  killed by the suite: RL1, RL4, RL8, RL10-RL13. killed here: RL2, RL3, RL5, RL6, RL9, RL14.

Mutants of 38cf0bd..f929b39 (fedlib/solvers.py, a93ab87 and 6b52af3: _momentum_prox_a_vector, a_norm's sum of the
exact a_i up to _SUMMED_A_NORM_STEPS; fedlib/sampling.py, 3e648f6: _check_rng; fedlib/schedules.py, f929b39:
RandomSteps' seed) (pass described in tests/README.md, Mutation passes):
  MP1 ``alpha >= 1`` -> ``> 1``; MP2 q - rho from the rounded q (no fsum); MP3 ``q_minus_rho >= 0`` -> ``> 0``; MP4
  the two (b^n, b) swapped; MP5 the ratio over q; MP6 ``n * b^n`` at q = rho; MP7 ``ratio >= 1`` -> ``> 1``; MP8
  ``out[n == 0] = 1.0`` dropped; MP9 ``out[-1] = 1.0``; MP10 expm1(n L); MP11 numpy's expm1 in the denominator; MP12
  b^n as the rounded q ** n; MP13 log(1 - ratio); MP14 ``tau <= 2**16`` -> ``<``; MP15 the tau clause dropped; MP16
  the threshold 2**4; MP17 ``tau > 2**16``; MP18 the ``|q - rho| < 1e-2`` clause dropped; MP19 ``or`` -> ``and``;
  MP20 at f929b39 the closed form divided by math.fsum((1, -alpha, -rho)), after bd0212b by the rounded q - rho
  again; MP21 n reversed; MP22 the threshold 2**20; MP23 the q = rho branch dropped. RC1 ``callable(getattr(rng,
  "choice", None))`` -> ``hasattr``; RC2, RC3 the check dropped from either sampler; RC4 Generators only; RC5 the
  message's repr for the type name. RS1 the seed check dropped; RS2 checked, not stored; RS3 minimum 1; RS4
  check_count (2.0 taken); RS5 minimum -1.
  killed by the suite: MP2, MP4-MP6, MP10, MP12, MP13, MP15, MP17, MP19, MP21, MP23, RC2-RC5, RS1-RS5. killed here:
  MP7, MP8, MP14, MP16, MP18, RC1; MP20 by the test of its fix (bd0212b), tests/test_solvers.py::
  test_momentum_prox_a_norm_beyond_2_16_steps_divides_by_the_exact_q_minus_rho (at f929b39 it survived as the more
  accurate divisor beyond 2**16 steps: 2.5e-15 where the rounded q - rho gave 5.5e-15 on 3,000 random draws). equivalent: MP1 (alpha = 1 is the only
  alpha it moves, lr * mu > 1 being refused, and there fsum gives q - rho = -rho, so the ratio is 1 and its branch
  returns rho ** n too), MP3 (fsum's q - rho is 0 only where 1 - alpha = rho exactly, so q = rho and
  _one_minus_alpha_pow is q ** n = rho ** n), MP9 (a_vector, the one caller, passes n = tau - 1, ..., 0: n == 0 is
  the last entry), MP11 (numpy's and math's expm1 of the same number differ by at most an ulp: the entries move by a
  unit of rounding, within the documented few, and p_0 is set to 1 either way), MP22 (sums up to 2**20 steps: the
  same values to the documented accuracy, the sum the closer; only the cost, O(tau) for O(1), differs).

Mutants of f929b39..780545c (fedlib/solvers.py, 0adf55a: _default_name; fedlib/schedules.py, 4a914ec:
expected_a_norms' RandomLocalWork branch) (pass described in tests/README.md, Mutation passes):
  LN1 every subclass named by its class; LN2 the ``type(solver) is not LocalSolver`` clause dropped; LN3 a subclass
  with a step of its own named "sgd"; LN4 ``momentum > 0`` -> ``>= 0``; LN5 "momentum" and "momentum-prox" swapped;
  LN6 momentum always "momentum"; LN7 the prox branch dropped; LN8 the schedule test inverted; LN9 "decayed-sgd"
  never; LN10 ``name is None`` -> ``not name``; LN11 "prox" only without a schedule. EA1 the branch dropped; EA2 only
  for work of several solvers; EA3 ``type(schedule) is RandomLocalWork``.
  found reading LN*: the default name was worked out before the fields were checked (LocalSolver(0.1,
  momentum="0.9") a TypeError, not the ValueError naming momentum): fixed in 1313319, its test in test_solvers.py.
  killed by the suite: LN3-LN9, EA1. killed here: LN1, LN10, LN11, EA2, EA3. equivalent: LN2 (own_step_methods of
  LocalSolver itself is empty, so the dropped clause never decides).
Mutants of cdf6ee0..fcc8b56 (fedlib/sampling.py, 7db70c6: as_participation's client and weight checks) (pass
described in tests/README.md, Mutation passes):
  AP1 ``clients.size == 0`` dropped; AP2 ``"iu"`` -> ``"i"`` (unsigned indices refused); AP3 ``not in "iu"`` -> ``==
  "f"`` (only float indices refused); AP4 ``or`` -> ``and``; AP5 the finite test dropped; AP6 only NaN refused (inf
  taken); AP7 ``weights < 0`` -> ``<= 0``; AP8 ``sum <= 0`` -> ``< 0``; AP9 the negative test dropped; AP10 ``sum``
  -> ``max``; AP11 round_participation's messages named "participation"; AP12 the clients' ``!r`` dropped.
  killed by the suite: AP1 (this file), AP4-AP9, AP11 (test_sampling.py, test_hot_paths_engines.py). killed here:
  AP2, AP3. equivalent: AP10 (the weights are finite and >= 0 by then, so max <= 0 and sum <= 0 both mean every
  weight 0, and there is at least one), AP12 (a list's str is its repr).

Mutants of 652fbe7..0e9da1f (fedlib/schedules.py, f7cc0a2: ``_check_local_work``, the one check of local work of
theorem3_check and speedup's closed forms; its callers' mutants in test_mutation_bounds_acceleration.py and
test_mutation_speedup_stragglers.py) (pass described in tests/README.md, Mutation passes): 4 mutants (ids as
drafted: LW5 not run), one at a time, ``pytest -x -q`` on test_speedup_bounds_stragglers_inputs.py,
test_experiments_speedup.py, test_bounds.py, test_mutation_bounds_acceleration.py,
test_mutation_speedup_stragglers.py and this file: 4 killed by the suite.
  LW1 the first attribute of ``needs`` not looked for; LW2 ``num_clients is not None and`` dropped (None compared);
  LW3 ``!=`` -> ``<`` (only local work for fewer clients refused); LW4 only the first missing attribute named.
  killed by the suite: LW1-LW4 (test_speedup_bounds_stragglers_inputs.py).

Mutants of 41ab8e8..3aae5f7 (fedlib/sampling.py, 3aae5f7: ``_check_q``'s message for q None; fedlib/schedules.py,
4f23d63: make_epoch_schedule's reversed (low, high) pair) (pass described in tests/README.md, Mutation passes): 3
mutants (ids as drafted: gaps are drafts not run), one at a time, ``pytest -x -q`` on test_sampling.py /
test_schedules.py, this file and test_bad_inputs_core.py: 3 killed by the suite.
  SQ1 ``not q`` for ``q is None`` (q = 0 told it is required); SQ2 the schemes' names swapped; ME1 ``hi <= lo`` (an
  equal pair refused). killed by the suite: SQ1, SQ2 (test_sampling.py), ME1 (test_schedules.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedlib.sampling import (Participation, effective_participants, expected_server_weights, round_participation,
                             sample_clients, weight_moments)
from fedlib.schedules import RandomEpochs, make_epoch_schedule, step_decay_lr, steps_per_epoch, whole_steps
from fedlib.solvers import (SOLVERS, LocalSolver, check_builtin_step, check_own_step, make_solver, momentum_sgd,
                            own_step_methods)


def test_momentum_default_is_the_papers_0_9():
    """Paper §6 and the official code use rho = 0.9: the default of momentum_sgd and make_solver."""
    assert momentum_sgd(0.1).momentum == 0.9
    assert make_solver("momentum", 0.1).momentum == 0.9
    assert make_solver("momentum-prox", 0.1, mu=0.5).momentum == 0.9


@pytest.mark.parametrize("name", SOLVERS)
def test_make_solver_names_what_it_built_without_weight_decay(name):
    """The solver's name is the one asked for (it labels results and figures); weight decay is
    off unless asked for (mu only for the proximal solvers, which refuse no other)."""
    mu = {"mu": 0.5} if "prox" in name else {}
    solver = make_solver(name, 0.1, **mu)
    assert solver.name == name
    assert solver.weight_decay == 0.0
    assert make_solver(name, 0.1, weight_decay=1e-4, **mu).weight_decay == 1e-4


def test_steps_per_epoch_with_batch_size_one_is_the_sample_count():
    """ceil(n_i / 1) = n_i: a batch of one sample is allowed."""
    np.testing.assert_array_equal(steps_per_epoch(np.array([3, 5, 1]), 1), [3, 5, 1])
    np.testing.assert_array_equal(steps_per_epoch(np.array([3, 5, 1]), 2), [2, 3, 1])
    with pytest.raises(ValueError, match="batch_size"):
        steps_per_epoch(np.array([3]), 0)


def test_whole_steps_forgives_a_few_ulps_and_no_more():
    """The documented tolerance is 8 ulps relative: 29 (1 - 1.5e-15) (about 7 ulps below 29) counts
    29 steps; 29 (1 - 4e-15) (18 ulps below) counts 28: it is not rounding to nearest."""
    eps = np.finfo(np.float64).eps
    assert whole_steps(29 * (1 - 1.5e-15)) == 29 and 1.5e-15 / eps < 8
    assert whole_steps(29 * (1 - 4e-15)) == 28
    assert whole_steps(28.5) == 28


def test_make_epoch_schedule_default_seed_is_zero():
    """The default seed is 0, as documented: the same draws as RandomEpochs(..., seed=0)."""
    n = np.array([10, 20, 30])
    schedule = make_epoch_schedule(n, 5, "2-5")
    reference = RandomEpochs(n, 5, 2, 5, 0)
    for t in range(5):
        np.testing.assert_array_equal(schedule.local_steps(t), reference.local_steps(t))


def test_step_decay_milestones_for_short_runs():
    """A milestone f is round max(1, floor(f T + 1/2)): with T = 2 the milestones 0.5 and 0.75 are
    rounds 1 and 2 (round 1 already decayed), and a milestone that rounds to round 0 moves to round 1
    (round 0 always has the base rate)."""
    assert step_decay_lr(1.0, 0, 2) == 1.0
    assert step_decay_lr(1.0, 1, 2) == pytest.approx(0.1)
    assert step_decay_lr(1.0, 2, 2) == pytest.approx(0.01)
    assert step_decay_lr(1.0, 0, 2, milestones=(0.1,)) == 1.0
    assert step_decay_lr(1.0, 1, 2, milestones=(0.1,)) == pytest.approx(0.1)


def test_full_participation_moments_are_fresh_writable_arrays():
    """weight_moments('full', p) returns its own arrays (not a read-only broadcast view of p)."""
    from fedlib.sampling import weight_moments

    p = np.array([0.25, 0.75])
    moments = weight_moments("full", p)
    np.testing.assert_array_equal(moments.presence, [[0.25, 0.75], [0.25, 0.75]])  # P(i in S) w_j = p_j
    np.testing.assert_array_equal(moments.pair, np.outer(p, p))
    moments.presence[0, 0] = 9.0  # a caller may scale the result in place
    np.testing.assert_array_equal(p, [0.25, 0.75])
    assert moments.presence[1, 0] == 0.25


def test_to_numpy_tree_copies_and_keeps_containers():
    """'A copy of obj with every torch tensor turned into a numpy array (NamedTuples, dicts, lists and
    tuples kept)': the arrays are copies (a CPU tensor's .numpy() shares its memory), plain tuples stay
    tuples, None and scalars pass through."""
    import torch

    from fedlib.algorithms import ServerState
    from fedlib.checkpoint import to_numpy_tree

    t, a = torch.zeros(3), np.zeros(2)
    out = to_numpy_tree({"t": t, "a": a, "pair": (1, a), "none": None, "list": [t]})
    t += 1.0
    a += 1.0
    np.testing.assert_array_equal(out["t"], np.zeros(3))
    np.testing.assert_array_equal(out["a"], np.zeros(2))
    assert type(out["pair"]) is tuple and out["pair"][0] == 1 and out["none"] is None
    assert isinstance(out["list"], list) and isinstance(out["list"][0], np.ndarray)
    state = ServerState(params={"w": torch.ones(2)}, server=None, variates=None, round=3, num_clients=2)
    back = to_numpy_tree(state)
    assert type(back) is ServerState and isinstance(back.params["w"], np.ndarray) and back.round == 3


def test_checkpoint_paths_may_be_strings(tmp_path):
    """save_checkpoint/load_checkpoint take any path-like, a plain str included."""
    from fedlib.checkpoint import load_checkpoint, save_checkpoint

    path = str(tmp_path / "run.ckpt")
    save_checkpoint(path, config={"a": 1}, round_done=2, state={"w": np.ones(2)}, history=[{"round": 0}], seed=4)
    doc = load_checkpoint(path, kind="run")
    assert doc["round"] == 2 and doc["rng"] == {"seed": 4, "next_round": 2, "note": doc["rng"]["note"]}
    np.testing.assert_array_equal(doc["state"]["w"], np.ones(2))


def test_load_checkpoint_refuses_other_pickles(tmp_path):
    """A readable pickle that is not a fedlib checkpoint (no 'format', or not a dict) is a
    CheckpointError naming the file, not a KeyError later."""
    import pickle

    from fedlib.checkpoint import CheckpointError, load_checkpoint

    for i, obj in enumerate(({"round": 3}, [1, 2], {"format": "other/1"})):
        path = tmp_path / f"{i}.ckpt"
        path.write_bytes(pickle.dumps(obj))
        with pytest.raises(CheckpointError, match=rf"{i}\.ckpt is not a fedlib.checkpoint/1 checkpoint"):
            load_checkpoint(path)


def test_config_diff_nested_and_message():
    """A key that is a mapping on one side and a value on the other differs (no crash); a missing
    nested key shows as '<missing>'; the message lists at most 8 keys."""
    from fedlib.checkpoint import CheckpointError, check_config, config_diff

    assert config_diff({"a": {"x": 1}}, {"a": 3}) == ["a"]
    assert config_diff({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}) == ["a.y"]
    with pytest.raises(CheckpointError, match=r"a\.y \(checkpoint 2, now '<missing>'\)"):
        check_config("c", {"a": {"x": 1, "y": 2}}, {"a": {"x": 1}})
    saved, now = {f"k{i}": i for i in range(10)}, {f"k{i}": -i - 1 for i in range(10)}
    with pytest.raises(CheckpointError) as info:
        check_config("c", saved, now)
    assert str(info.value).count("(checkpoint") == 8 and "k7 (" in str(info.value) and "k8 (" not in str(info.value)


# ----------------------------------------------------------------------- solvers: an own step's closed forms
@dataclasses.dataclass(frozen=True)
class _RampStep(LocalSolver):
    """SGD whose step ``k`` (from 0) multiplies the gradient by ``k + 1``, with the matching counter:
    x_tau = x_0 - lr * sum_k (k + 1) g_k, so a_i = [1, 2, ..., tau] and ||a_i||_1 = tau (tau + 1) / 2,
    where LocalSolver's SGD formulas would give [1] * tau and tau."""

    def update(self, state, grads):
        return super().update(state, grads * float(state.step + 1))

    def counter_step(self, k, counter):
        a, u = counter
        return (a + (k + 1.0), 1.0)


@dataclasses.dataclass(frozen=True)
class _RampStepWithItsOwnAVector(_RampStep):
    """``_RampStep`` with its own ``a_vector``, written from LocalSolver's: SGD's closed form (ones)
    times the ramp k + 1. ``super().a_vector`` must then be the built-in formula, not a probe of this
    step (which would count the ramp twice: [1, 4, 9, ...])."""

    def a_vector(self, tau):
        return super().a_vector(tau) * np.arange(1.0, tau + 1.0)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_a_subclass_with_its_own_step_gets_the_a_vector_and_a_norm_of_that_step(weight_decay):
    """Mutants: the own-step branch of a_vector / a_norm dropped (SGD's ones and tau), the probe left with
    weight decay on, its sign flipped, a_norm read after the first step. With weight decay 0.1 the
    decayed probe would give a_0 = 1 - 2 * 0.1 * lr * 1 for tau = 2, not 1."""
    solver = _RampStep(lr=0.1, weight_decay=weight_decay)
    assert not solver.builtin_step
    assert check_own_step("s", solver) is solver
    for tau in (1, 2, 5):
        np.testing.assert_allclose(solver.a_vector(tau), np.arange(1.0, tau + 1.0), rtol=1e-13)
        assert solver.a_norm(tau) == pytest.approx(tau * (tau + 1) / 2, rel=1e-13)


def test_a_subclass_that_overrides_a_vector_gets_the_built_in_formula_from_super():
    """Mutant: the own-step branch taken even where the subclass overrides a_vector (its super() call
    then probed the step instead of giving the formula)."""
    solver = _RampStepWithItsOwnAVector(lr=0.1)
    assert not solver.builtin_step
    np.testing.assert_array_equal(solver.a_vector(4), [1.0, 2.0, 3.0, 4.0])
    assert check_own_step("s", solver) is solver


# ------------------------ solvers (own steps) and sampling (a sampler's Participation): mutants of 8bd9827..
@dataclasses.dataclass(frozen=True)
class _OwnInit(LocalSolver):
    """Overrides only ``init`` (here the same start): its step is no longer LocalSolver's own."""

    def init(self, params, correction=None):
        return super().init(params, correction)


@dataclasses.dataclass(frozen=True)
class _WrongCounter(LocalSolver):
    """LocalSolver's step, but a counter that reports twice the steps taken."""

    def counter_step(self, k, counter):
        a, u = super().counter_step(k, counter)
        return (a + 1.0, u)


def test_overriding_init_alone_makes_the_step_the_solvers_own():
    """STEP_METHODS names init: a fused engine would start the round without the subclass's init."""
    solver = _OwnInit(lr=0.1)
    assert own_step_methods(_OwnInit) == ["init"]
    assert not solver.builtin_step
    with pytest.raises(ValueError, match=r"^e: _OwnInit overrides LocalSolver's step \(init\), which x$"):
        check_builtin_step("e", [solver], "x")


def test_overriding_counter_step_alone_is_probed_and_a_wrong_counter_refused():
    """STEP_METHODS names counter_step: a subclass that changes only the counter is not built-in, so
    check_own_step probes it. One step from 0 with gradient e_0 moves by -lr e_0 (a = [1], sum 1) while
    this counter reports 1 + 1 = 2: refused, where FedNova would divide by 2 instead of 1."""
    solver = _WrongCounter(lr=0.1)
    assert own_step_methods(_WrongCounter) == ["counter_step"]
    assert not solver.builtin_step
    with pytest.raises(ValueError, match=r"^s: _WrongCounter reports \|\|a_i\|\|_1 = 2\.0 after 1 step\(s\)"):
        check_own_step("s", solver)


@dataclasses.dataclass(frozen=True)
class _SameStep(LocalSolver):
    """Overrides ``update`` with LocalSolver's own step (so it is probed, and must pass)."""

    def update(self, state, grads):
        return super().update(state, grads)


def test_a_correct_own_step_with_weight_decay_passes_the_probe():
    """The probe turns weight decay off (decay is part of G_i, not of a_i). With it on, two SGD steps
    from 0 on gradients e_0, e_1 would give x_2 = -lr e_0 - lr (e_1 - wd lr e_0), a = [1 - wd lr, 1]
    (sum 2 - 0.01 = 1.99 at lr = 0.1, wd = 0.1) against the counter's 2: a right solver refused."""
    solver = _SameStep(lr=0.1, weight_decay=0.1)
    assert not solver.builtin_step
    assert check_own_step("s", solver) is solver
    # the arithmetic above, on the solver itself with decay on: the counter (2) is not the decayed sum
    state = solver.init(np.zeros(2))
    for k in range(2):
        state = solver.update(state, np.eye(2)[k])
    np.testing.assert_allclose(-state.params / 0.1, [1 - 0.1 * 0.1, 1.0], rtol=1e-14)
    assert state.a_norm == 2.0


@dataclasses.dataclass(frozen=True)
class _DoubleStepCount(LocalSolver):
    """LocalSolver's step, but ``step`` advanced by two."""

    def update(self, state, grads):
        new = super().update(state, grads)
        return new._replace(step=state.step + 2)


def test_an_update_that_advances_step_by_two_is_refused():
    """``update`` must advance ``step`` by one (the within-round schedule and the counter read it)."""
    with pytest.raises(ValueError, match=r"^s: _DoubleStepCount\.update must return a SolverState with step "
                                         r"advanced by one \(0 -> 1\), got 2$"):
        check_own_step("s", _DoubleStepCount(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _ShortAVector(LocalSolver):
    """Plain SGD whose closed form ``a_vector`` always has one entry (numpy would broadcast it)."""

    def a_vector(self, tau):
        return np.ones(1)


def test_an_a_vector_of_the_wrong_length_is_refused_even_when_it_broadcasts():
    """SGD's a_i is [1] * tau; a_vector(2) = [1.] equals it entry by entry under broadcasting, but its
    length is 1, not tau = 2 (run_replicas reads the length)."""
    with pytest.raises(ValueError, match=r"^s: _ShortAVector\.a_vector\(2\) is \[1\.0\] \(shape \(1,\)\), but its "
                                         r"step gives a_i = \[1\.0, 1\.0\] \(length 2\)$"):
        check_own_step("s", _ShortAVector(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _CounterOffByPpm(LocalSolver):
    """LocalSolver's step with a counter 1 ppm too large at every step."""

    def counter_step(self, k, counter):
        a, u = super().counter_step(k, counter)
        return (a * (1 + 1e-6), u)


def test_a_counter_one_ppm_off_is_refused():
    """The probe's tolerance is a relative 1e-9: after one SGD step the counter says 1.000001, the step
    moved by exactly 1."""
    with pytest.raises(ValueError, match=r"^s: _CounterOffByPpm reports \|\|a_i\|\|_1 = 1\.000001 after 1 step"):
        check_own_step("s", _CounterOffByPpm(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _FasterFromStep3(LocalSolver):
    """Doubles the gradient from local step 2 on (a warm-up the counter does not know of)."""

    def update(self, state, grads):
        return super().update(state, grads if state.step < 2 else 2 * grads)


def test_a_step_that_departs_from_its_counter_only_after_two_steps_is_refused():
    """a_i = [1, 1, 2, 2, 2] after 5 steps (sum 8) while the inherited counter says 5; after 1 or 2 steps
    both are [1] / [1, 1]. The probe at tau = 5 catches it."""
    state = _FasterFromStep3(lr=0.5).init(np.zeros(2))
    for k in range(2):
        state = _FasterFromStep3(lr=0.5).update(state, np.eye(2)[k])
    assert state.a_norm == 2.0 and np.array_equal(state.params, [-0.5, -0.5])  # tau = 2: consistent
    with pytest.raises(ValueError, match=r"^s: _FasterFromStep3 reports \|\|a_i\|\|_1 = 5\.0 after 5 step\(s\), but "
                                         r"its update moves a unit-gradient probe by a_i = \[1\.0, 1\.0, 2\.0, 2\.0, "
                                         r"2\.0\] \(sum 8\.0\)"):
        check_own_step("s", _FasterFromStep3(lr=0.5))


def _own(clients, weights):
    from fedlib.sampling import Participation

    return lambda t: Participation(np.asarray(clients), np.asarray(weights, dtype=float))


def test_a_sampler_naming_a_negative_client_is_refused():
    """Client -1 would index p[-1], the last client, without a word."""
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(0\): clients must lie in 0\.\.2 \(p has 3 clients\), got \[-1, 1\]$"):
        round_participation(_own([-1, 1], [0.5, 0.5]), np.full(3, 1 / 3), None, 0, 0)


def test_a_sampler_with_no_client_is_refused_by_name():
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(4\) must name at least one client by integer index, got "
                                         r"clients \[\]$"):
        round_participation(_own(np.zeros(0, dtype=np.int64), []), np.full(3, 1 / 3), None, 0, 4)


def test_a_sampler_whose_weights_sum_to_zero_is_refused():
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(0\): weights must be finite and >= 0 with a positive sum, "
                                         r"got \[0\.0, 0\.0\]$"):
        round_participation(_own([0, 2], [0.0, 0.0]), np.full(3, 1 / 3), None, 0, 0)


def test_a_sampler_may_give_one_participant_weight_zero():
    """omega_i >= 0 (documented): a participant of weight 0 is allowed, as sample_uniform gives a
    client with p_i = 0."""
    from fedlib.sampling import round_participation

    part = round_participation(_own([0, 2], [0.0, 1.5]), np.array([0.0, 0.5, 0.5]), None, 0, 0)
    assert part.clients.tolist() == [0, 2] and part.weights.tolist() == [0.0, 1.5]


def test_check_sampling_prefixes_the_scheme_name_with_where():
    """The stacked engine checks runs[r].sampling: an unknown scheme is named with its run."""
    from fedlib.sampling import check_sampling

    with pytest.raises(ValueError, match=r"^runs\[2\]\.sampling must be one of \['full', 'uniform', "
                                         r"'with-replacement'\], got 'bogus'$"):
        check_sampling("bogus", None, where="runs[2].")
    assert check_sampling("uniform", 3, where="runs[2].") is None
    assert check_sampling(lambda t: None, None) is None


@dataclasses.dataclass(frozen=True)
class _TorchOnlyInit(LocalSolver):
    """An ``init`` written with a tensor-only method (``Tensor.clone``)."""

    def init(self, params, correction=None):
        return super().init(params.clone(), correction)


def test_a_torch_only_init_is_refused_naming_it_and_the_numpy_probe():
    """The probe starts every tau with init(np.zeros(tau)): numpy has no .clone(), and the refusal names
    the class and the method (init), the AttributeError chained as its cause."""
    with pytest.raises(ValueError, match=r"^solver: _TorchOnlyInit\.init raised AttributeError.*probe runs on numpy "
                                         r"float64 vectors \(here of length 1\)") as info:
        check_own_step("solver", _TorchOnlyInit(lr=0.1))
    assert isinstance(info.value.__cause__, AttributeError)


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
@pytest.mark.parametrize("name", ["sgd", "momentum"])
def test_make_solver_refuses_a_negative_mu_for_a_solver_without_prox(name):
    # mutant S2 (mu == 0 -> mu <= 0): mu=-1 was dropped silently
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^mu: solver '{name}' has no proximal term, got mu = -1\.0"):
        make_solver(name, 0.1, mu=-1.0)


def test_whole_steps_refuses_work_between_minus_one_and_zero():
    # mutant SC1 (work < 0 -> work < -1): -0.5 gave -1 steps
    from fedlib.schedules import whole_steps

    with pytest.raises(ValueError, match=r"^work must be >= 0 \(a number of steps\), got min -0\.5"):
        whole_steps([2.0, -0.5])
    assert whole_steps(0.0) == 0.0


def test_wall_clock_overflow_names_the_client_and_its_work():
    # mutant SC4: the message said 1.8446744073709552e+19 (the clip) for a client whose work is 1e300 steps
    # (the inf case is SC3's, also killed by tests/test_schedules.py)
    from fedlib.schedules import WallClock

    with pytest.raises(ValueError, match=r"^speeds: client 1 would take inf steps in round_seconds = 10\.0"):
        WallClock([1.0, 1e308], 10.0).local_steps(0)
    with pytest.raises(ValueError, match=r"^speeds: client 0 would take 1e\+300 steps in round_seconds = 1\.0"):
        WallClock([1e300, 1.0], 1.0).local_steps(0)


def test_participation_refuses_a_bool_among_its_clients():
    from fedlib.sampling import Participation, as_participation

    with pytest.raises(ValueError, match=r"^participation: clients must be integer indices, got \[0, True\]"):
        as_participation(Participation([0, True], [0.5, 0.5]))
    assert as_participation(Participation([0, 1], [0.5, 0.5])).clients.tolist() == [0, 1]


def test_step_decay_lr_takes_milestones_from_a_generator():
    # mutant SC15 (milestones not turned into a list): the check consumed the generator, so no decay
    from fedlib.schedules import step_decay_lr

    assert step_decay_lr(1.0, 3, 4, milestones=(f for f in (0.5, 0.75)), factor=0.1) == pytest.approx(0.01)


def test_make_solver_refuses_a_zero_momentum_for_a_solver_without_a_buffer():
    # mutant S8 (momentum is not None -> truthy momentum): momentum=0.0 with 'sgd' passed; the documented
    # rule (and train_clients / the CLI) refuses any momentum given to a solver without a buffer
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.0"):
        make_solver("sgd", 0.1, momentum=0.0)


# ------------------------------------------------------------------------ mutants of 37f92d9..eb85c03
def _own_sgd_step(name, direction, base=LocalSolver, **namespace):
    """A solver class (a subclass of ``base``) with its own ``update`` x <- x - lr * direction(self, x, g) and SGD's
    counter (a_i all ones)."""
    from fedlib.tree import tree_map

    def update(self, state, grads):
        lr = self.step_size(state.step)
        params = tree_map(lambda x, g: x - lr * direction(self, x, g), state.params, grads)
        shadow = self.counter_step(state.step, state.shadow)
        return state._replace(params=params, step=state.step + 1, shadow=shadow, a_norm=shadow[0])

    return type(name, (base,), {"update": update, **namespace})


def test_an_own_step_that_clips_large_gradient_entries_is_refused_as_not_linear():
    """Gradient clipping is named among the steps the linearity probe refuses (check_own_step's docstring; eq. (4)
    needs Delta_i = -lr G_i a_i). Entries clipped to |g| <= 39 pass every unit-gradient probe, and of
    LINEARITY_PROBE only the 40 of step 3 is cut: with lr 0.1 and a_i = (1, 1, 1, 1, 1), x moves to
    -0.1 (3 - 0.5 + 39 - 7 + 0.3) = -3.48 instead of -0.1 (3 - 0.5 + 40 - 7 + 0.3) = -3.58 (2.8% off) and to
    -0.1 (0.25 + 6 - 2 + 0.75 - 12) = 0.7 as it should. The probe compares to 1e-9 relative, so this is refused
    (mutant SV13, rtol 1e-9 -> 1e-1 in _probe_linear: it passed, and FedNova divided a clipped change by
    ||a_i||_1). Clipping at 41 cuts nothing of the probe: passed."""
    clipped = dataclasses.dataclass(frozen=True)(
        _own_sgd_step("Clipped", lambda self, x, g: np.clip(g, -self.bound, self.bound), bound=39.0))
    with pytest.raises(ValueError, match=r"^solver: Clipped's update is not linear in the gradients: .* move x from 0 "
                                         r"to \[-3\.48, 0\.7\], not to -lr G a_i = \[-3\.58, 0\.7\]"):
        check_own_step("solver", clipped(lr=0.1))
    loose = dataclasses.dataclass(frozen=True)(
        _own_sgd_step("Loose", lambda self, x, g: np.clip(g, -41.0, 41.0)))
    assert check_own_step("solver", loose(lr=0.1)).lr == 0.1


def test_own_step_checks_probe_solvers_that_differ_only_in_a_slot():
    """OwnStepChecks keys a solver by its class and field values only when it holds nothing else: no ``__slots__``
    of a subclass (its docstring). Here a slot says whether the own update adds weight decay; two solvers with
    equal fields (lr 0.1, weight_decay 0.5) differ only in it. The one that leaves the decay out must be probed and
    refused, not passed as the first one's equal (mutant SV9, the ``__slots__`` clause of _behaviour_key dropped):
    one step from x = 1 with a zero gradient must give 1 - 0.1 * 1 * 0.5 = 0.95 (a^(1) = 1), it gives 1.0."""
    from fedlib.solvers import OwnStepChecks

    class Decaying(LocalSolver):
        __slots__ = ("adds_decay",)

        def __init__(self, *args, adds_decay=True, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "adds_decay", adds_decay)

    def direction(self, x, g):
        return g + self.weight_decay * x if self.adds_decay else g

    solver_class = _own_sgd_step("Decaying", direction, base=Decaying)
    checks = OwnStepChecks()
    checks.check("solver", solver_class(lr=0.1, weight_decay=0.5))
    with pytest.raises(ValueError, match=r"^client 1: Decaying is given weight_decay = 0\.5, but its update leaves it "
                                         r"out: one step from x = 1\.0 with a zero gradient gives 1\.0, not 0\.95"):
        checks.check("client 1", solver_class(lr=0.1, weight_decay=0.5, adds_decay=False))


def test_check_participant_steps_names_the_client_not_its_place_among_the_participants():
    """The ValueError names the first participant without a step (check_participant_steps' docstring): with steps
    (2, 3, 0) and participants (2, 0), participant 0 of the round is client 2, which has 0 steps, so the message
    names client 2 (mutant SC2, ``clients[k]`` -> ``k``, named client 0; the docstring's example, participants
    (0, 1), has k = client). Client 2 left out of the round may do no work: steps of (0, 1) are returned."""
    from fedlib.schedules import check_participant_steps

    with pytest.raises(ValueError, match=r"^schedule: round 4 gives participant client 2 0 local steps \(need >= 1"):
        check_participant_steps(np.array([2, 3, 0]), np.array([2, 0]), 4)
    np.testing.assert_array_equal(check_participant_steps(np.array([2, 3, 0]), np.array([1, 0]), 4), [3, 2])


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
@pytest.mark.parametrize("weights, text", [(np.array(["0.5", "0.5"]), "'0.5'"), ([b"0.5", 0.5], "b'0.5'")])
def test_as_participation_refuses_weights_given_as_text(weights, text):
    """Sampling weights are numbers: a numpy string array (mutant SA3, only non-arrays searched for text) or bytes
    in a list (mutant SA4, only ``str`` searched) is refused; numpy would read both as the number 0.5."""
    from fedlib.sampling import Participation, as_participation

    with pytest.raises(ValueError, match=f"^participation: weights must be numbers, got the text {text}"):
        as_participation(Participation(np.array([0, 1]), weights))


# ====================================================================== f9b9704..HEAD: check_participant_steps and
# check_epoch_schedule's num_samples
def test_check_participant_steps_takes_only_integer_arrays_on_its_fast_path():
    """Only 1-d integer arrays skip check_int_array. Whole-number float counts come back as int64 through the
    checked path (np.array([2.0, 3.0]) with participant 1 gives array([3]), int64), 2.5 is refused rather than
    returned as a participant's steps, and a bool array of clients is refused (as a mask it would pick client 0
    out of [True, False]). Kills the mutants that let float steps (kind 'f') or bool clients (kind 'b') through
    the fast path."""
    from fedlib.schedules import check_participant_steps

    got = check_participant_steps(np.array([2.0, 3.0]), np.array([1]), 0)
    assert got.tolist() == [3] and got.dtype == np.int64
    with pytest.raises(ValueError, match=r"^steps must hold whole numbers"):
        check_participant_steps(np.array([2.5, 3.0]), np.array([0]), 0)
    with pytest.raises(ValueError, match=r"^clients must hold whole numbers, got dtype bool$"):
        check_participant_steps(np.array([2, 3]), np.array([True, False]), 0)


def test_check_participant_steps_names_a_negative_client_given_as_a_list():
    """clients given as a list go through check_int_array with minimum 0: [-1] is 'clients must be >= 0 for every
    client (client 0 has -1)', the entry named by position (an int array's -1 is named by the index check).
    Kills the mutant without that minimum."""
    from fedlib.schedules import check_participant_steps

    with pytest.raises(ValueError, match=r"^clients must be >= 0 for every client \(client 0 has -1\)$"):
        check_participant_steps(np.array([2, 3]), [-1], 0)


@pytest.mark.parametrize("clients", [np.array([], dtype=np.int64), np.array([], dtype=np.uint8), [], np.array([])],
                         ids=["int64", "uint8", "list", "float"])
def test_check_participant_steps_refuses_a_round_without_participants_by_name(clients):
    """A round has at least one participant (round_participation refuses a sampler's empty round, check_int_array
    an empty list): an empty int array is refused as the empty list is, naming clients, on the fast path too. Before,
    the int array returned an empty array while the list was refused; mutant SC6 of f9b9704..2e0d04d (the range
    check without ``clients.size``) gave numpy's 'zero-size array to reduction operation minimum', naming nothing;
    on this code the same mutant (the fast path without ``clients.size``) does."""
    from fedlib.schedules import check_participant_steps

    with pytest.raises(ValueError, match=r"^clients must be a non-empty 1-d array of whole numbers, got shape \(0,\)$"):
        check_participant_steps(np.array([2, 0, 3]), clients, 0)


def test_check_epoch_schedule_reports_a_client_of_no_samples_as_another_size():
    """num_samples holds whole counts >= 0: a run whose client 1 has 0 samples, with a schedule counted for 64 and
    32, is the size mismatch ('client 1: 32 samples, the run's client has 0'), not a refusal of the count 0.
    Kills the mutant that checks num_samples with minimum 1."""
    from fedlib.schedules import FixedEpochs, check_epoch_schedule

    with pytest.raises(ValueError, match=r"^schedule counts steps for other client sizes \(client 1: 32 samples, "
                                         r"the run's client has 0\)"):
        check_epoch_schedule(FixedEpochs([64, 32], batch_size=32, epochs=2), [64, 0], 32)


# ---------------------------------------------------------------- mutants of 2e0d04d..fb2fbe6 (fedlib/sampling.py)
def test_round_participation_sorts_a_sampler_unsorted_in_the_middle():
    """A sampler's clients in any order come back ascending, each with its weight, also when the first is below
    the last ([1, 3, 2]: weights 0.5, 1.5, 1.0 -> clients [1, 2, 3], weights [0.5, 1.0, 1.5]) (mutant S5 of
    2e0d04d..fb2fbe6: only clients[0] > clients[-1] taken as unsorted)."""
    p = [0.25] * 4
    part = round_participation(lambda t: Participation([1, 3, 2], [0.5, 1.5, 1.0]), p, None, seed=0, round_index=0)
    assert part.clients.tolist() == [1, 2, 3] and part.weights.tolist() == [0.5, 1.0, 1.5]


def test_full_participation_refuses_a_zero_q_as_any_other_given_q():
    """q = 0 given with "full" is a given q like 3: refused by sample_clients and the closed forms alike (mutant F6
    of 2e0d04d..fb2fbe6: ``q is not None`` -> ``q``, which let 0 through as no q)."""
    p = [0.5, 0.5]
    for call in (lambda: sample_clients("full", p, 0, 0, 0), lambda: weight_moments("full", p, 0),
                 lambda: effective_participants("full", p, 0), lambda: expected_server_weights("full", p, [1, 2], 0)):
        with pytest.raises(ValueError, match=r"^clients_per_round: full participation takes every client, so q = 0"):
            call()


# ---------------------------------------------------------------- mutants of 0571233~1..165a974 (fedlib/schedules.py)
def test_make_epoch_schedule_names_low_for_a_bool_low_equal_to_high():
    """(True, 1) is refused as a bad ``low``, not passed on as one epoch: True == 1, so an unchecked low went to
    FixedEpochs, whose error named ``epochs`` (mutant S10 of 0571233~1..165a974: the pair's low unchecked)."""
    for pair in ((True, 1), (np.True_, 1)):
        with pytest.raises(ValueError, match=r"^low must be a whole number >= 1, got True$"):
            make_epoch_schedule([64, 32], 32, pair)


def test_wall_clock_seconds_to_finish_refuses_a_bool_in_a_tuple_as_in_a_list():
    """A tuple of steps is taken as given, like a list: (True, 2) is refused by the bool's index, where
    np.asarray((True, 2)) is [1, 2] and took the bool as 1 step (mutant S13 of 0571233~1..165a974: only a list kept
    as given); (3, 4) still gives max(3/1, 4/2) = 3 seconds."""
    from fedlib.schedules import WallClock

    clock = WallClock([1.0, 2.0], 10.0)
    with pytest.raises(ValueError, match=r"^steps must hold whole numbers, got the bool True at index 0$"):
        clock.seconds_to_finish((True, 2), 0)
    assert clock.seconds_to_finish((3, 4), 0) == 3.0


# ---------------------------------------------------------------- mutants of 1112cf7..24d535b (fedlib/schedules.py)
class _Returns:
    """A schedule of the user's own, without num_clients (so check_schedule_size leaves it to the rounds): its
    local_steps returns ``value`` every round."""

    def __init__(self, value):
        self.value = value

    def local_steps(self, round_index):
        return self.value


@pytest.mark.parametrize("value, got", [(np.array([2, 3]), r"got shape \(2,\)"), ([2, 3], r"got shape \(2,\)"),
                                        ((2, 3, 4, 5), r"got shape \(4,\)"),
                                        (None, r"got NoneType \(a missing return statement\?\)"),
                                        ({0: 2}, "got dict")],
                         ids=["array", "list", "tuple", "None", "dict"])
def test_round_local_steps_names_its_owner_whatever_the_schedule_returns(value, got):
    """``owner`` (where the run's number of clients comes from) is named in each of the three 'one step count per
    client' messages: a numpy array, a list or tuple of another length, and no counts at all (None, a dict).
    3 clients, the problem's. Mutants SZ8 (the None / dict message) and SZ9 (the list message) of 1112cf7..24d535b:
    'p' written there, whatever the owner."""
    from fedlib.schedules import round_local_steps

    with pytest.raises(ValueError, match=rf"^schedule\.local_steps\(4\) must give one step count per client \(3 "
                                         rf"clients in the problem\), {got}$"):
        round_local_steps(_Returns(value), 4, 3, "the problem")


def test_a_schedule_is_an_object_whose_local_steps_is_callable():
    """An object with a local_steps attribute that is no method (a list of counts) is no schedule: refused by name by
    check_schedule_size and round_local_steps alike, where a hasattr test passed it on to fail at round 0 as
    "TypeError: 'list' object is not callable" (mutant SZ11 of 1112cf7..24d535b)."""
    from fedlib.schedules import check_schedule_size, round_local_steps

    class Counts:
        local_steps = [2, 3]

    for call in (lambda: check_schedule_size(Counts(), 2), lambda: round_local_steps(Counts(), 0, 2)):
        with pytest.raises(ValueError, match=r"^schedule must be an object with local_steps\(round\) -> \(m,\) ints "
                                             r"\(fedlib\.schedules: FixedSteps\(.*\) for fixed counts\), got Counts$"):
            call()


def test_check_schedule_size_names_the_schedule_by_the_name_it_is_given():
    """``name`` is the parameter the schedule came in as, in the message for an object that is no schedule too, not
    only in the size message (mutant SZ12 of 1112cf7..24d535b: _check_has_local_steps called without it)."""
    from fedlib.schedules import check_schedule_size

    with pytest.raises(ValueError, match=r"^runs\[1\]\.schedule must be an object with local_steps\(round\) -> \(m,\) "
                                         r"ints \(fedlib\.schedules: FixedSteps\(\[2, 3\]\) for fixed counts\), got list$"):
        check_schedule_size([2, 3], 2, name="runs[1].schedule")
    with pytest.raises(ValueError, match=r"^runs\[1\]\.schedule must be an object with local_steps\(round\) -> \(m,\) "
                                         r"ints \(a function is no schedule: .*\), got function$"):
        check_schedule_size(lambda t: [2, 3], 2, name="runs[1].schedule")


# ---------------------------------------------------------------- mutants of 8fc7fcd..0bee57f (sampling, solvers)
def test_weight_moments_with_replacement_of_a_certain_client_raises_no_runtime_warning(capfd):
    """A client of weight 1 with q = 3 draws: log1p(-1) = -inf gives 1 - (1 - 1)^2 = 1 without numpy's divide-by-zero
    RuntimeWarning (mutant SA6 of 8fc7fcd..0bee57f, the errstate around -expm1((q-1) log1p(-p)) dropped) and
    without its message printed: errstate(divide="print") (mutant EP1 of the negative-assertion pass) wrote
    'Warning: divide by zero encountered in log1p' to the C stderr, which no warnings filter sees. By hand:
    presence[i, j] = p_j (1 - (1 - p_i)^2) off the diagonal, p_j on it: [[1, 0], [0, 0]]; pair = (1 - 1/3) p p^T +
    diag(p) / 3 = [[1, 0], [0, 0]]."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        moments = weight_moments("with-replacement", [1.0, 0.0], 3)
    assert capfd.readouterr() == ("", "")
    assert moments.presence.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert moments.pair.tolist() == [[1.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("mu", [0.45, 0.2, 0.3])
def test_proximal_a_vector_where_one_minus_alpha_rounds(mu):
    """a_i = ((1 - alpha)^n)_{n = tau-1, ..., 0} for alpha = 0.45, 0.2, 0.3 (lr = 1), whose 1 - alpha rounds in
    float64 (the rounding e = (1 - q) - alpha is -5.6e-17, -5.6e-17, 5.6e-17), tau = 1001 (0.55^1000 = 1.2e-260, a
    normal float): every entry against mpmath's exp(n log1p(-alpha)) at 40 digits, rel 1e-15 (the code is within
    2.7e-16), and the last entry (n = 0) exactly 1. Mutants of 8fc7fcd..0bee57f: OA3 (``log1p(e / q)`` ->
    ``log1p(e)``: n e (1/q - 1) relative, 4.5e-14 at n = 1000 for alpha = 0.45) and OA5 (``exp(n ...)`` -> ``exp((n
    + 1) ...)``: one factor 1 + e/q too many, so the last entry is 0.9999999999999999 at alpha = 0.2); both within
    the rel 1e-14 of tests/test_solvers.py::test_proximal_a_vector_many_steps, whose cases are near 0 or dyadic."""
    mpmath = pytest.importorskip("mpmath")
    solver = make_solver("prox", 1.0, mu=mu)
    tau = 1001
    a = solver.a_vector(tau)
    assert a[-1] == 1.0
    with mpmath.workdps(40):
        log_q = mpmath.log1p(-mpmath.mpf(solver.alpha))
        exact = [float(mpmath.exp((tau - 1 - j) * log_q)) for j in range(tau)]
    assert a.tolist() == pytest.approx(exact, rel=1e-15, abs=0.0)


# ---------------------------------------------------------------- mutants of a655138..81203bf (fedlib/solvers.py)
@pytest.mark.parametrize("momentum,mu", [(0.0, 0.0), (0.5, 0.0), (0.0, 1.0), (0.5, 1.0)])
def test_a_schedule_of_factor_one_gives_a_last_entry_of_exactly_one(momentum, mu):
    """lr_schedule k -> 1 with lr = 0.41, whose 0.41 * (1 / 0.41) rounds to 0.9999999999999999: step_size(k) is lr
    itself, so the last local step's gradient enters once at the full step, a_{tau-1} = eta_{tau-1} / eta = 1
    exactly (with momentum or prox too: nothing follows the last step), and without momentum or prox every entry is
    eta_k / eta = 1 exactly, the a of plain SGD. Mutants of a655138..81203bf: IR2 (the plain schedule's
    ``eta / lr`` -> ``eta * (1 / lr)``) and IR10 (the adjoint pass's ``b / lr`` -> ``b * (1 / lr)``), both within
    the 1e-12 of tests/test_solvers.py's schedule tests."""
    solver = LocalSolver(lr=0.41, momentum=momentum, mu=mu, lr_schedule=lambda k: 1.0)
    a = solver.a_vector(6)
    assert a[-1] == 1.0
    if momentum == 0 and mu == 0:
        assert a.tolist() == [1.0] * 6
    assert LocalSolver(lr=0.41, momentum=momentum, mu=mu, lr_schedule=lambda k: 1.0).a_vector(1).tolist() == [1.0]


# ------------------------------------------ mutants of the 8996bdf pass (fedlib/solvers.py, 61c3eb9: check_round_lr)
class _CorrectionAtItsOwnLr(LocalSolver):
    """An own step that scales the control-variate correction by 0.1 / self.lr: SGD's step, and the correction
    right at lr = 0.1 only (twice it at 0.05)."""

    def update(self, state, grads):
        corr = state.correction
        return super().update(state if corr is None else state._replace(correction=corr * (0.1 / self.lr)), grads)


def test_check_round_lr_probes_another_lr_strictly_inside_its_bounds_with_the_correction():
    """OwnStepChecks.check_round_lr(base, base.with_lr(lr), t) probes (one solver remembered: len 1) an lr other than
    base's strictly between 1e-200 and 1e200 and nothing else (len 0): not base's own lr, which the algorithm probed,
    nor 1e-200, 1e200 or beyond, where a right step fails the probe (momentum 0.9 at 1e-320: a_i = [1.9002..., 1.0]
    for the [1.9, 1.0] it reports). The correction is probed as given: at 0.05 this step adds twice it, refused with
    correction=True only. Mutants of the 8996bdf pass: RL2 (base's lr probed too), RL3 (the lower bound dropped),
    RL5 (the bounds probed), RL6 (the upper bound 1e300), RL9 (the correction not passed on)."""
    from fedlib.solvers import OwnStepChecks

    base = _CorrectionAtItsOwnLr(lr=0.1)
    for lr, probed in ((0.1, 0), (1e-320, 0), (1e-200, 0), (2e-200, 1), (0.05, 1), (5e199, 1), (1e200, 0),
                       (1e300, 0)):
        checks = OwnStepChecks()
        assert checks.check_round_lr(base, base.with_lr(lr), 3, correction=(lr == 0.1)).lr == lr
        assert len(checks) == probed, lr
    heavy = _CorrectionAtItsOwnLr(lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"reports \|\|a_i\|\|_1 = 2\.9 after 2 step\(s\)"):  # why 1e-320 is not probed
        check_own_step("solver", heavy.with_lr(1e-320))
    assert OwnStepChecks().check_round_lr(heavy, heavy.with_lr(1e-320), 3).lr == 1e-320
    with pytest.raises(ValueError, match=r"^algorithm\.solver\.with_lr\(0\.05\) \(round 3's lr\): _CorrectionAtItsOwnLr "
                                         r"is given a control-variate correction .* gives -0\.1, not -0\.05"):
        OwnStepChecks().check_round_lr(base, base.with_lr(0.05), 3, correction=True)


# ------------------------------------------------- mutants of 38cf0bd..f929b39 (fedlib/solvers.py, fedlib/sampling.py)
def test_momentum_prox_a_vector_ends_in_one_and_takes_a_momentum_below_the_rounding_of_one_minus_alpha():
    """Momentum + prox, rho = 1/2, alpha = lr * mu = 1/4 (q = 3/4): p_n = (q^(n+1) - rho^(n+1)) / (q - rho), so
    a = (p_2, p_1, p_0) = (1.1875, 1.25, 1) and a_norm = 3.4375, all dyadic. There numpy's and math's expm1 of
    L = log1p(-1/3) differ in the last bit, and p_0 = expm1(L) / expm1(L) is 1 - 2**-53 unless set: the last entry
    is exactly 1 (the last step's gradient enters once, at the full step). rho = 1e-300, alpha = 1/2: 1 - alpha - rho
    rounds to 1/2 = q, so rho / q is below q's rounding (log1p(-1) would be a domain error) and p_n = q^n (1 + 2 rho /
    q + ...) rounds to 2**-n: a = (1/8, 1/4, 1/2, 1), a_norm 1.875. Mutants of 38cf0bd..f929b39: MP8 (``out[n == 0]
    = 1.0`` dropped), MP7 (``ratio >= 1.0`` -> ``ratio > 1.0``)."""
    solver = LocalSolver(lr=1.0, momentum=0.5, mu=0.25)
    a = solver.a_vector(3)
    assert a[-1] == 1.0
    assert a.tolist() == pytest.approx([1.1875, 1.25, 1.0], rel=4.5e-16, abs=0.0)
    assert solver.a_norm(3) == 3.4375
    tiny = LocalSolver(lr=1.0, momentum=1e-300, mu=0.5)
    assert tiny.a_vector(4).tolist() == [0.125, 0.25, 0.5, 1.0]
    assert tiny.a_norm(4) == 1.875


def test_momentum_prox_a_norm_sums_the_exact_vector_up_to_2_16_steps_and_where_q_is_near_rho():
    """Momentum + prox: up to 2**16 local steps, and beyond where |q - rho| = |1 - alpha - rho| < 1e-2, a_norm is the
    sum of the exact a_i: within 4e-16 relative of mpmath at 50 digits (the note of _SUMMED_A_NORM_STEPS: 4.0e-16 at
    most), where the closed form [q(1 - q^tau)/alpha - rho(1 - rho^tau)/(1 - rho)] / (q - rho), a difference of two
    sums, is 1.5e-15 off at rho = 0.89, alpha = 0.1 (q - rho = 0.01 + 9e-18), tau = 20, and 1.0e-15 at tau = 2**16
    (the sums: 4.9e-17, 6.2e-17). At q = rho = 1/2 and 2**16 + 1 steps, a_norm = sum_n (n + 1) 2**-n = 4 - (tau + 2)
    2**(1 - tau), 4.0 in float64, where the closed form divides by q - rho = 0. Mutants of 38cf0bd..f929b39: MP14
    (``tau <= 2**16`` -> ``<``), MP16 (the threshold 2**4), MP18 (the ``|q - rho| < 1e-2`` clause dropped)."""
    mpmath = pytest.importorskip("mpmath")
    solver = LocalSolver(lr=1.0, momentum=0.89, mu=0.1)
    assert abs((1.0 - solver.alpha) - 0.89) >= 1e-2  # the closed form's side of a_norm's first test
    for tau in (20, 2 ** 16):
        with mpmath.workdps(50):
            q, r = 1 - mpmath.mpf(solver.alpha), mpmath.mpf(0.89)
            exact = (q * (1 - q ** tau) / (1 - q) - r * (1 - r ** tau) / (1 - r)) / (q - r)
        assert solver.a_norm(tau) == pytest.approx(float(exact), rel=4e-16, abs=0.0), tau
    assert LocalSolver(lr=1.0, momentum=0.5, mu=0.5).a_norm(2 ** 16 + 1) == 4.0


class _ChoiceOfInt:
    """An rng whose ``choice`` is an attribute, not a method."""
    choice = 3


class _Drawing:
    """An rng of its own: draws with a Generator's ``choice``."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)

    def choice(self, *args, **kwargs):
        return self._g.choice(*args, **kwargs)


@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
def test_an_rng_whose_choice_cannot_be_called_is_refused_by_name(scheme):
    """sample_with_replacement / sample_uniform_without_replacement take an rng that draws by a ``choice`` method (a
    Generator, or an object of one's own with a callable ``choice``, which draws as the Generator it wraps) and refuse
    one whose ``choice`` is no method by name, not with "'int' object is not callable" inside the draw. Mutant RC1 of
    38cf0bd..f929b39 (``callable(getattr(rng, "choice", None))`` -> ``hasattr(rng, "choice")``)."""
    from fedlib.sampling import sample_uniform_without_replacement, sample_with_replacement

    sampler = sample_with_replacement if scheme == "with-replacement" else sample_uniform_without_replacement
    p = [0.1, 0.2, 0.3, 0.4]
    with pytest.raises(ValueError, match=r"^rng must be a numpy random Generator .*got _ChoiceOfInt$"):
        sampler(p, 2, _ChoiceOfInt())
    own, plain = sampler(p, 2, _Drawing(7)), sampler(p, 2, np.random.default_rng(7))
    assert np.array_equal(own.clients, plain.clients) and np.array_equal(own.weights, plain.weights)


# ---------------------------------------------- mutants of f929b39..780545c (fedlib/solvers.py, 0adf55a: _default_name)
def test_a_local_solver_is_named_by_its_fields_whatever_its_schedule_or_class():
    """LocalSolver's default name (0adf55a) follows its fields: "decayed-sgd" is an lr_schedule without momentum or
    prox, so a proximal or momentum solver with a schedule keeps "prox" / "momentum" / "momentum-prox"; a subclass
    that keeps the built-in step (a method of its own that is no step) is named by its fields too, only one with a
    step of its own by its class; a given name, even "", is kept. Mutants of f929b39..780545c: LN1 (every subclass
    named by its class), LN11 (prox only without a schedule), LN10 (``if not self.name``: "" replaced)."""

    class WithReport(LocalSolver):  # no step method of its own: builtin_step
        def report(self):
            return f"lr {self.lr}"

    half = lambda k: 0.5  # noqa: E731
    assert LocalSolver(0.1, mu=1.0, lr_schedule=half).name == "prox"
    assert LocalSolver(0.1, momentum=0.5, lr_schedule=half).name == "momentum"
    assert LocalSolver(0.1, momentum=0.5, mu=1.0, lr_schedule=half).name == "momentum-prox"
    assert WithReport(0.1).builtin_step
    assert (WithReport(0.1).name, WithReport(0.1, momentum=0.9).name, WithReport(0.1, lr_schedule=half).name) == \
        ("sgd", "momentum", "decayed-sgd")
    assert LocalSolver(0.1, momentum=0.9, name="").name == ""


# --------------------------------------- mutants of f929b39..780545c (fedlib/schedules.py, 4a914ec: expected_a_norms)
def test_expected_a_norms_points_any_random_local_work_to_its_closed_form():
    """expected_a_norms and population_tau_eff refuse RandomLocalWork by pointing to speedup.mean_a_norms: for work
    of one solver too, and for a subclass of RandomLocalWork (isinstance), not with the message of a schedule of
    one's own ('no closed-form E||a_i||_1 for ...'). Mutants of f929b39..780545c: EA2 (only work of several
    solvers), EA3 (``type(schedule) is RandomLocalWork``)."""
    from fedlib.schedules import RandomLocalWork, expected_a_norms, population_tau_eff
    from fedlib.solvers import sgd

    class Named(RandomLocalWork):
        pass

    said = r"^schedule: RandomLocalWork draws each client's solver as well as its tau_i.*speedup\.mean_a_norms"
    for work in (RandomLocalWork([1, 1], [2, 2], num_solvers=1, seed=0), Named([1, 1], [2, 2], num_solvers=2, seed=0)):
        with pytest.raises(ValueError, match=said):
            expected_a_norms(work, sgd(0.1))
        with pytest.raises(ValueError, match=said):
            population_tau_eff([0.5, 0.5], work, sgd(0.1))


# ------------------------------------------ as_participation's client checks: mutants of cdf6ee0..fcc8b56 (7db70c6)
def test_as_participation_takes_unsigned_indices_and_refuses_text_or_complex_ones():
    """Client indices of any integer dtype are taken (np.uint8, as a user's sampler may return them), anything else
    is refused as float indices are: text ('0', '1') and complex numbers. Mutants of cdf6ee0..fcc8b56: AP2 (unsigned
    indices refused), AP3 (only float indices refused: text and complex let through as clients)."""
    from fedlib.sampling import as_participation

    part = as_participation(Participation(np.array([2, 0], dtype=np.uint8), [0.25, 0.75]))
    assert part.clients.tolist() == [2, 0] and part.weights.tolist() == [0.25, 0.75]
    for clients, shown in ((["0", "1"], "['0', '1']"), (np.array([0j, 1j]), "[0j, 1j]")):
        with pytest.raises(ValueError) as err:
            as_participation(Participation(clients, [0.5, 0.5]))
        assert str(err.value) == f"participation must name at least one client by integer index, got clients {shown}"

"""Mutation pass on fedlib.experiments.speedup (chapter 8) and fedlib.experiments.stragglers
(chapter 9): tests that kill the mutants the other tests let survive. Every expected number
is derived by hand, from the paper's formula or from a plain numpy loop, never from the
function under test.

Review and mutants of f37e303..6eb7195, ``speedup.sampling_summary``'s ``_summary_population`` (pass described in
tests/README.md, Mutation passes):
  review: test_sampling_summary_names_the_bad_q_eff_among_several_rows;
  killed here: SS2, SS6, SS7;
  equivalent:
- SS3 (``len(populations) != 1`` -> ``> 1``) and SS8 (``populations[0]`` -> ``populations[-1]``): the empty
  list is refused one line before, so ``populations`` has at least one entry, and after the check exactly one.

Mutants of ``sampling_summary``'s paired error for rows without seeds, of the rangeless pass (described in
tests/README.md, Mutation passes).

Mutants of 8bd9827.., ``speedup.sampling_step_conditions`` (chapter 8's conditions use the problem's own p) (pass
described in tests/README.md, Mutation passes).

Mutants of 86c5527..90cbd4d (experiments/speedup.py) (pass described in tests/README.md, Mutation passes):
experiments/speedup.py sampling_summary: SP1 ``is None`` -> ``is not None``; SP2 ``slope`` printed for
  ``slope_eff``; SP3 the ``slope_eff`` part never printed: killed by the suite.

Mutants of 37f92d9..d2bb791 (the changed hunks of experiments/speedup.py: ``_local_work``, ``drawn_weights``,
``DrawnWeights``, the plots' checks) (pass described in tests/README.md, Mutation passes): 13 mutants, one at a
time, ``pytest -x`` on test_speedup_bounds_stragglers_inputs.py, this file, test_experiments_speedup.py,
test_quadratic_engine.py and ``tests/test_doctests.py -k fedlib.experiments.speedup``: 12 killed by the suite
(SP1 replicate without _local_work, SP2 ``draw`` not required, SP3 ``rounds`` minimum 1, SP4 ``ddof=0``, SP5 the
plain mean of the per-round weights, SP6 ``sqrt(rounds - 1)``, SP7 ``<=`` -> ``<`` in ``holds``, SP8 ``z``'s sign,
SP9 the a_norm cache keyed by tau alone, SP11 ``k`` unchecked, SP12 ``u`` not divided by the mean tau_eff, SP13
participant_mean_steps without _local_work), 1 here (SP10 ``work.draw(t + 1)``: the cyclic draws of the other
tests are the same multiset shifted), 0 equivalent.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/experiments/stragglers.py)
(pass described in tests/README.md, Mutation passes):
  ST1 loss_at without the NaN test; ST2 plot_loss_vs_time ``len(axes) != 2`` -> ``< 2``; ST3 its unknown-key
  refusal dropped; ST4 summary_markdown's FedNova chi^2 ``:.3g`` -> ``:.1e``. killed by the suite: ST1, ST3.
  killed here: ST2, ST4.

Mutants of 0571233~1..165a974 (fedlib/experiments/stragglers.py: run_strategy's sync_steps by check_count) (pass
described in tests/README.md, Mutation passes):
  SG1 by check_int; SG2 minimum 0. killed by the suite: SG1, SG2.

Mutants of f929b39..780545c (fedlib/experiments/speedup.py, adf2d8b: _factory_solvers and its four call sites)
(pass described in tests/README.md, Mutation passes):
  SF1 ``len(solvers) != n`` -> ``<``; SF2 -> ``>``; SF3-SF6 consistency_sweep, speedup_grid, sampling_grid,
  sampling_bias back to ``list(solver_factory(lr))``; SF7 ``list(...)`` dropped; SF8 the message's lr unformatted;
  SF9 speedup_grid's check on ``work`` for its copies' ``w``. killed by the suite: SF2-SF6, SF8. killed here: SF1,
  SF7. equivalent: SF9 (replicate's RandomLocalWork keeps work.num_solvers, so both give the same count).

Mutants of 652fbe7..0e9da1f (fedlib/experiments/speedup.py, f7cc0a2: ``_local_work`` / ``_check_work`` through
``fedlib.schedules._check_local_work``; the LW mutants of fedlib/schedules.py in
test_mutation_solvers_schedules_sampling.py) (pass described in tests/README.md, Mutation passes): 1 mutant (ids as
drafted: LW9 not run), run as those: 1 killed by the suite.
  LW8 ``_check_work`` without the problem's client count. killed by the suite: LW8
  (test_speedup_bounds_stragglers_inputs.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.batched import run_batched
from fedlib.experiments import stragglers as ST
from fedlib.experiments.synthetic import make_problem
from fedlib.rng import generator
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd


# ====================================================================== chapter 9: stragglers
@pytest.fixture(scope="module")
def problem4():
    return make_problem(num_clients=4)


def _curves(losses, seconds=None, seeds=None, strategy="wait-for-all"):
    losses = np.atleast_2d(np.asarray(losses, dtype=float))
    if seconds is None:
        seconds = np.tile(np.arange(losses.shape[1], dtype=float), (len(losses), 1))
    seeds = tuple(range(len(losses))) if seeds is None else tuple(seeds)
    return ST.StragglerCurves(strategy, seeds, losses, np.atleast_2d(np.asarray(seconds, dtype=float)),
                              np.zeros((len(losses), losses.shape[1] - 1)), np.ones(len(losses)))


def test_make_clock_defaults_are_chapter_9s_setup():
    """Chapter 9's setup (median 20 steps/s, lognormal spread 0.75, rounds of 0.5 s, jitter 0.2,
    stragglers with probability 0.1 at 0.2 of their speed) is make_clock's default, and the base
    speeds are s_i = median * exp(spread * Z_i) with Z from generator(seed, "client_speeds")."""
    clock = ST.make_clock(7)
    z = generator(0, "client_speeds").standard_normal(7)
    np.testing.assert_allclose(clock.speeds, 20.0 * np.exp(0.75 * z), rtol=1e-14)
    assert (clock.round_seconds, clock.jitter, clock.straggler_prob, clock.straggler_factor, clock.seed) == \
        (0.5, 0.2, 0.1, 0.2, 0)
    other = ST.make_clock(5, seed=3, median_speed=4.0, spread=0.3, round_seconds=2.0)
    np.testing.assert_allclose(other.speeds, 4.0 * np.exp(0.3 * generator(3, "client_speeds").standard_normal(5)),
                               rtol=1e-14)


def test_make_clock_num_clients():
    assert ST.make_clock(1).num_clients == 1   # one client is a clock
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="num_clients"):
            ST.make_clock(bad)


def _engine_losses(problem, aggregation, schedule, rounds, seed, lr=0.02, batch_size=20):
    run = run_batched(make_algorithm(aggregation, sgd(lr)), problem, schedule, rounds, batch_size=batch_size, seed=seed)
    return [run.initial["train_loss"]] + [h["train_loss"] for h in run.history]


def test_run_strategy_defaults_are_the_papers_synthetic_lr_and_batch(problem4):
    """Paper App. I (synthetic data): client lr 0.02, mini-batches of 20 — the default of run_strategy and
    of run_strategies."""
    clock = ST.make_clock(problem4.num_clients, seed=0, median_speed=4.0, round_seconds=1.0)
    tau = ST.sync_steps_of(clock)
    c = ST.run_strategy(problem4, clock, "wait-for-all", 2, [1])
    np.testing.assert_allclose(c.losses[0], _engine_losses(problem4, "fedavg", FixedSteps([tau] * 4), 2, 1),
                               rtol=1e-12)
    calls = []
    runs = ST.run_strategies(problem4, clock, 2, [1], progress=calls.append)
    assert calls == list(ST.STRATEGIES)   # progress hears of every strategy, in order
    import dataclasses
    np.testing.assert_allclose(runs["fednova-fixed-time"].losses[0],
                               _engine_losses(problem4, "fednova", dataclasses.replace(clock, seed=1), 2, 1), rtol=1e-12)


def test_run_strategy_sync_steps_one_and_seed_checks(problem4):
    clock = ST.make_clock(problem4.num_clients, seed=0, median_speed=4.0, round_seconds=1.0)
    one = ST.run_strategy(problem4, clock, "wait-for-all", 1, [0], sync_steps=1)   # one step each is a round
    assert one.mean_steps.tolist() == [1.0]
    with pytest.raises(ValueError, match="seeds"):
        ST.run_strategy(problem4, clock, "wait-for-all", 1, [1.5])   # not silently seed 1
    gen = ST.run_strategy(problem4, clock, "wait-for-all", 1, iter([0, 2]))   # any iterable of seeds
    assert gen.seeds == (0, 2) and gen.losses.shape == (2, 2)


def test_smoothed_end_loss_default_is_the_last_5_percent():
    """40 rounds: 5% is the last 2 rounds (10% would be 4)."""
    losses = np.concatenate([[9.0], np.linspace(4.0, 1.0, 40)])
    rng = np.random.default_rng(0)
    losses[1:] += rng.uniform(0, 0.01, 40)
    c = _curves(losses)
    assert ST.smoothed_end_loss(c).tolist() == [float(np.median(losses[-2:]))]
    assert ST.smoothed_end_loss(c, 0.1).tolist() == [float(np.median(losses[-4:]))]


def _last_lead_by_loop(a, b, window):
    """Plain loop: the last round r (1-based) whose running mean over rounds r-window+1..r of ``a`` is
    strictly below that of ``b`` (0 if none); index 0 of a, b is the initial loss, never used."""
    last = 0
    for r in range(window, len(a)):
        if sum(a[r - window + 1:r + 1]) / window < sum(b[r - window + 1:r + 1]) / window:
            last = r
    return last


def test_last_lead_round_default_window_is_25():
    rounds = 80
    a = np.concatenate([[5.0], np.where(np.arange(1, rounds + 1) <= 30, 1.0, 2.0)])
    b = np.concatenate([[5.0], np.full(rounds, 1.9)])
    # ahead while the window holds k > w/10 of the 1.0 rounds: up to round 30 + 0.9 w (never a tie)
    want = _last_lead_by_loop(a, b, 25)
    assert (_last_lead_by_loop(a, b, 24), want, _last_lead_by_loop(a, b, 26)) == (51, 52, 53)
    assert ST.last_lead_round(_curves(a), _curves(b)).tolist() == [want]


def test_last_lead_round_window_equal_to_rounds_and_ties():
    a = [5.0, 1.0, 3.0, 1.9]      # mean of the 3 rounds: 5.9 / 3
    b = [5.0, 2.0, 2.0, 2.0]      # 6 / 3
    assert ST.last_lead_round(_curves(a), _curves(b), window=3).tolist() == [3]   # window == rounds is allowed
    assert ST.last_lead_round(_curves(b), _curves(a), window=3).tolist() == [0]
    with pytest.raises(ValueError, match="window"):
        ST.last_lead_round(_curves(a), _curves(b), window=4)
    # equal losses: nobody is ahead (strictly lower), at any window
    same = _curves([5.0, 1.0, 1.0, 1.0])
    assert ST.last_lead_round(same, same, window=1).tolist() == [0]
    assert ST.last_lead_round(same, _curves([5.0, 1.0, 1.0, 1.0]), window=2).tolist() == [0]


def test_last_lead_round_refuses_curves_of_other_lengths():
    with pytest.raises(ValueError, match="behind: 3 rounds, ahead has 4"):
        ST.last_lead_round(_curves([5.0, 1, 1, 1, 1]), _curves([5.0, 2, 2, 2]), window=1)


def test_summary_end_fraction_may_be_one_not_more():
    c = {k: ST.StragglerCurves(k, (0,), np.array([[2.0, 1.0, 0.5]]), np.array([[0.0, 1.0, 2.0]]),
                               np.array([[0.1, 0.2]]), np.array([3.0]))
         for k in ST.STRATEGIES}
    ends = {k: ST.smoothed_end_loss(v, 1.0) for k, v in c.items()}
    times = {k: np.array([1.0]) for k in c}
    assert "last 100% of rounds" in ST.summary_markdown(c, 2.0, 0.6, times, ends, None, end_fraction=1.0)
    for bad in (1.5, 2.0):
        with pytest.raises(ValueError, match="end_fraction"):
            ST.summary_markdown(c, 2.0, 0.6, times, ends, None, end_fraction=bad)


# ====================================================================== chapter 8: speedup
from fedlib.experiments import speedup as S  # noqa: E402
from fedlib.problems import random_quadratic  # noqa: E402
from fedlib.schedules import RandomLocalWork  # noqa: E402


def test_make_solvers_are_sgd_momentum_half_prox_one_decay_09():
    """The four solvers of SOLVER_NAMES, through ||a||_1 of REFERENCE.md's table: SGD tau; heavy-ball rho = 0.5
    (tau - rho(1 - rho^tau)/(1 - rho))/(1 - rho); prox alpha = lr*mu, mu = 1: (1 - (1 - alpha)^tau)/alpha;
    step sizes lr*0.9^k: sum_k 0.9^k."""
    lr = 0.05
    sgd_, mom, prox, dec = S.make_solvers(lr)
    for tau in (1, 3, 7):
        assert sgd_.a_norm(tau) == pytest.approx(tau, rel=1e-12)
        assert mom.a_norm(tau) == pytest.approx((tau - 0.5 * (1 - 0.5 ** tau) / 0.5) / 0.5, rel=1e-12)
        alpha = lr * 1.0
        assert prox.a_norm(tau) == pytest.approx((1 - (1 - alpha) ** tau) / alpha, rel=1e-12)
        assert dec.a_norm(tau) == pytest.approx(sum(0.9 ** k for k in range(tau)), rel=1e-12)


def test_base_setup_defaults_and_ranges():
    """Four clients of random_quadratic(4, 10, seed=0, spread=1), tau ranges [1,4], [2,6], [4,12], [8,16],
    four solvers, the work drawn from the same seed."""
    problem, work = S.base_setup()
    want = random_quadratic(4, 10, seed=0, spread=1.0)
    np.testing.assert_array_equal(problem.H, want.H)
    np.testing.assert_array_equal(problem.e, want.e)
    assert list(work.low) == [1, 2, 4, 8] and list(work.high) == [4, 6, 12, 16]
    assert work.num_solvers == 4 and work.seed == 0
    other, w3 = S.base_setup(seed=3, dim=2, spread=2.0)
    want = random_quadratic(4, 2, seed=3, spread=2.0)
    np.testing.assert_array_equal(other.e, want.e)
    assert w3.seed == 3
    draws = [RandomLocalWork([1, 2, 4, 8], [4, 6, 12, 16], num_solvers=4, seed=3).draw(t) for t in range(3)]
    for t, (steps, choice) in enumerate(draws):
        np.testing.assert_array_equal(w3.draw(t)[0], steps)
        np.testing.assert_array_equal(w3.draw(t)[1], choice)


def test_replicate_copies_must_be_a_positive_integer():
    base, work = S.base_setup(seed=0, dim=2)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="copies"):
            S.replicate(base, work, bad)
    rep, _ = S.replicate(base, work, np.int64(2))
    np.testing.assert_allclose(rep.p, np.full(8, 0.125))


def test_counts_given_as_a_string_or_bytes_are_refused_as_such():
    base, work = S.base_setup(seed=0, dim=2)
    for bad in ("12", b"\x0c"):      # list(b"\x0c") would be [12]: 12 rounds
        with pytest.raises(ValueError, match="rounds_list must be a sequence of integers"):
            S.consistency_sweep(base, work, bad)
    with pytest.raises(ValueError, match="rounds_list must be a sequence of integers"):
        S.consistency_sweep(base, work, 12)


def test_mean_a_norms_by_hand_and_shared_lr():
    """E||a_i||_1 over tau uniform on [low_i, high_i] and the solvers drawn uniformly: for SGD and
    SGD with steps 0.5^k, client [1, 2]: (1 + 2 + 1 + 1.5) / 4; client [3, 3]: (3 + 1.75) / 2."""
    from fedlib.solvers import decayed_sgd
    work = RandomLocalWork([1, 3], [2, 3], num_solvers=2, seed=0)
    solvers = [sgd(0.1), decayed_sgd(0.1, gamma=0.5)]
    np.testing.assert_allclose(S.mean_a_norms(work, solvers), [5.5 / 4, 4.75 / 2], rtol=1e-12)
    np.testing.assert_allclose(S.mean_a_norms(work, iter(solvers)), [5.5 / 4, 4.75 / 2], rtol=1e-12)  # any iterable
    with pytest.raises(ValueError, match="share one base learning rate"):
        S.mean_a_norms(work, [sgd(0.1), sgd(0.2)])


def test_theorem3_lr_by_hand_and_checks():
    assert S.theorem3_lr(0.5, 1, 2.0, 8) == pytest.approx(0.125, rel=1e-15)     # 0.5 * sqrt(1 / 16)
    assert S.theorem3_lr(2.0, 9, 0.25, 4) == pytest.approx(6.0, rel=1e-15)      # 2 * sqrt(9 / 1)
    assert S.theorem3_lr(1.0, 4, 1.0, 1) == pytest.approx(2.0, rel=1e-15)       # one round, sqrt(4)
    for kwargs, name in ((dict(lr_scale=0.0), "lr_scale"), (dict(lr_scale=-1.0), "lr_scale"),
                         (dict(num_clients=0), "num_clients"), (dict(num_clients=2.5), "num_clients"),
                         (dict(tau_tilde=0.0), "tau_tilde"), (dict(tau_tilde=-2.0), "tau_tilde"),
                         (dict(rounds=0), "rounds"), (dict(rounds=2.5), "rounds")):
        args = dict(lr_scale=0.5, num_clients=4, tau_tilde=2.0, rounds=8) | kwargs
        with pytest.raises(ValueError, match=name):
            S.theorem3_lr(**args)


# ---------------------------------------------------------------- hand-made pieces of chapter 8
from fedlib.engines.quadratic import run_replicas  # noqa: E402

LOW, HIGH = np.array([1, 2, 4, 8]), np.array([4, 6, 12, 16])
TAU_TILDE = float(np.mean((LOW + HIGH) / 2))   # 6.625: E tau of base_setup's clients, equal p


def _a_bar(solvers, low=LOW, high=HIGH):
    return np.array([np.mean([s.a_norm(t) for s in solvers for t in range(lo, hi + 1)]) for lo, hi in zip(low, high)])


def _minimiser(problem, w):
    """argmin sum_i w_i F_i with F_i = x'H_i x/2 - e_i'x."""
    return np.linalg.solve(np.einsum("i,ijk->jk", w, problem.H), w @ problem.e)


def test_consistency_sweep_row_by_hand():
    base, work = S.base_setup(seed=0, dim=3)
    T = 20
    calls = []
    (row,) = S.consistency_sweep(base, work, [T], progress=calls.append)
    assert calls == ["T=20"]
    lr = 0.5 * math.sqrt(4 / (TAU_TILDE * T))        # default lr_scale 0.5, m = 4
    assert row.rounds == T and row.lr == pytest.approx(lr, rel=1e-14)
    solvers = S.make_solvers(lr)
    w = base.p * _a_bar(solvers)
    x_tilde = _minimiser(base, w / w.sum())
    x_star = _minimiser(base, base.p)
    nova = run_replicas(base, "fednova", solvers, work, T)
    avg = run_replicas(base, "fedavg", solvers, work, T, surrogate=x_tilde)

    def rms_last_half(v):      # the last half of the T + 1 = 21 iterates: t = 10..20
        return math.sqrt(sum(x * x for x in v[10:]) / 11)

    assert row.fednova_distance == pytest.approx(rms_last_half(nova.distance[:, 0]), rel=1e-12)
    assert row.fedavg_distance == pytest.approx(rms_last_half(avg.distance[:, 0]), rel=1e-12)
    assert row.fedavg_surrogate_distance == pytest.approx(rms_last_half(avg.surrogate_distance[:, 0]), rel=1e-12)
    assert row.fednova_min_grad2 == pytest.approx(nova.grad_norm2[:, 0].min(), rel=1e-12)
    assert row.fedavg_min_grad2 == pytest.approx(avg.grad_norm2[:, 0].min(), rel=1e-12)
    assert row.surrogate_gap == pytest.approx(np.linalg.norm(x_star - x_tilde), rel=1e-10)
    g = sum(p * (H @ x_tilde - e) for p, H, e in zip(base.p, base.H, base.e))
    assert row.floor == pytest.approx(float(g @ g), rel=1e-10)


def test_speedup_grid_defaults_and_the_replicas_mean_by_hand():
    """Defaults: FedNova only, sigma 3, 8 replicas, seed 0, lr_scale 0.1; mean_grad2 is (1/T) sum_{t<T}
    ||grad F||^2 averaged over replicas and stderr the replicas' standard error."""
    base, work = S.base_setup(seed=0, dim=3)
    T = 10
    calls = []
    (row,) = S.speedup_grid(base, work, [1], [T], progress=calls.append)
    assert calls == ["fednova m=4 T=10"] and row.algorithm == "fednova" and row.clients == 4
    lr = 0.1 * math.sqrt(4 / (TAU_TILDE * T))
    run = run_replicas(base, "fednova", S.make_solvers(lr), work, T, sigma=3.0, replicas=8, seed=0)
    per = [sum(run.grad_norm2[t, r] for t in range(T)) / T for r in range(8)]
    mean = sum(per) / 8
    std = math.sqrt(sum((v - mean) ** 2 for v in per) / 7)
    assert row.lr == pytest.approx(lr, rel=1e-14)
    assert row.mean_grad2 == pytest.approx(mean, rel=1e-12)
    assert row.stderr == pytest.approx(std / math.sqrt(8), rel=1e-10)
    assert row.tau_tilde == pytest.approx(run.mean_local_steps, rel=1e-14)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # NaN by definition, not numpy's "Degrees of freedom <= 0" warning
        (one,) = S.speedup_grid(base, work, [1], [T], replicas=1)   # one replica: no standard error
    assert math.isnan(one.stderr)
    assert one.mean_grad2 == pytest.approx(sum(run_replicas(base, "fednova", S.make_solvers(lr), work, T, sigma=3.0,
                                                            replicas=1, seed=0).grad_norm2[:T, 0]) / T, rel=1e-12)
    (two,) = S.speedup_grid(base, work, [1], [T], replicas=2)
    assert math.isfinite(two.stderr) and two.stderr > 0


def test_participant_mean_steps_checks_scheme_and_p():
    base, work = S.base_setup(seed=0, dim=2)
    assert S.participant_mean_steps("with-replacement", [0.25] * 4, work) == pytest.approx(TAU_TILDE)
    assert S.participant_mean_steps("with-replacement", [1.0, 0, 0, 0], work) == pytest.approx(2.5)
    with pytest.raises(ValueError, match="scheme"):
        S.participant_mean_steps("poisson", base.p, work)
    for bad in ([0.5, 0.5, 0.5, 0.5], [0.5, 0.5], [1.5, -0.5, 0, 0]):
        with pytest.raises(ValueError, match=r"^p\b"):
            S.participant_mean_steps("with-replacement", bad, work)


def test_sampling_grid_defaults_by_hand():
    """Defaults: with replacement, FedNova with the population tau_eff, sigma 3, 4 replicas, seeds 0..3,
    lr 0.1 sqrt(q / (tau T)); q_eff = q / (1 + (q - 1)||p||^2) = 2 / 1.25."""
    base, work = S.base_setup(seed=0, dim=3)
    T, q = 10, 2
    calls = []
    (row,) = S.sampling_grid(base, work, [1], [q], [T], progress=calls.append)
    assert calls == ["m=4 q=2 T=10"]
    lr = 0.1 * math.sqrt(q / (TAU_TILDE * T))
    solvers = S.make_solvers(lr)
    fixed = float(base.p @ _a_bar(solvers))
    per_seed = []
    for s in range(4):
        run = run_replicas(base, "fednova", solvers, work, T, sigma=3.0, replicas=4, seed=s,
                           sampling="with-replacement", clients_per_round=q, tau_eff=fixed)
        per_seed.append(float(run.grad_norm2[:T].mean()))
    assert (row.algorithm, row.scheme, row.population, row.clients, row.rounds, row.tau_eff) == \
        ("fednova", "with-replacement", 4, 2, 10, "population")
    assert row.lr == pytest.approx(lr, rel=1e-14)
    assert row.mean_grad2 == pytest.approx(np.mean(per_seed), rel=1e-12)
    assert row.stderr == pytest.approx(np.std(per_seed, ddof=1) / 2, rel=1e-10)
    assert row.effective_clients == pytest.approx(1.6, rel=1e-12)


def test_sampling_grid_fedavg_takes_the_participants_tau_eff_and_checks():
    base, work = S.base_setup(seed=0, dim=3)
    (row,) = S.sampling_grid(base, work, [1], [2], [10], algorithm="fedavg", replicas=1, seeds=2)
    assert row.tau_eff == "participants" and row.algorithm == "fedavg"
    lr = 0.1 * math.sqrt(2 / (TAU_TILDE * 10))
    want = [float(run_replicas(base, "fedavg", S.make_solvers(lr), work, 10, sigma=3.0, seed=s,
                               sampling="with-replacement", clients_per_round=2).grad_norm2[:10].mean()) for s in (0, 1)]
    assert row.mean_grad2 == pytest.approx(np.mean(want), rel=1e-12)
    with pytest.raises(ValueError, match="algorithm"):
        S.sampling_grid(base, work, [1], [2], [10], algorithm="fedprox", replicas=1, seeds=2)
    with pytest.raises(ValueError, match="copies_list"):
        S.sampling_grid(base, work, [1.5], [2], [10], replicas=1, seeds=2)
    with pytest.raises(ValueError, match="use speedup_grid"):
        S.sampling_grid(base, work, [1], [2], [10], scheme="full", replicas=1, seeds=2)


def _expected_weights_by_enumeration(p, a, q, choice):
    """c_j = E[tau_eff * omega_j] over q draws with replacement ~ p (a client drawn k times trains once with
    weight omega = k / q), by enumerating every ordered draw: tau_eff = sum_i omega_i a_i ("participants") or
    sum over the distinct drawn clients of p_i a_i ("selected_p", App. H)."""
    import itertools
    m = len(p)
    c = np.zeros(m)
    for draw in itertools.product(range(m), repeat=q):
        prob = np.prod([p[k] for k in draw])
        omega = np.bincount(draw, minlength=m) / q
        tau = omega @ a if choice == "participants" else sum(p[i] * a[i] for i in set(draw))
        c += prob * tau * omega
    return c


def test_sampling_bias_defaults_and_limits_by_hand():
    """Defaults lr_scale 0.5, seeds 0, 1, 2; c_j of App. H's and the default tau_eff by enumerating the draws,
    x_c = argmin sum c_j F_j, and the measured distances from run_replicas' averaged iterates."""
    base, work = S.base_setup(seed=0, dim=2)
    T, q = 12, 2
    rows = S.sampling_bias(base, work, [q], [T])
    lr = 0.5 * math.sqrt(q / (TAU_TILDE * T))
    solvers = S.make_solvers(lr)
    a = _a_bar(solvers)
    fixed = float(base.p @ a)
    x_star = _minimiser(base, base.p)
    # the default's c_j has the closed form of sampling_bias's docstring
    c_part = _expected_weights_by_enumeration(base.p, a, q, "participants")
    np.testing.assert_allclose(c_part, (1 - 1 / q) * base.p * fixed + base.p * a / q, rtol=1e-12)
    assert [r.tau_eff for r in rows] == list(S.TAU_EFF_CHOICES)
    for r in rows:
        policy = {"population": fixed, "participants": None, "selected_p": "selected_p"}[r.tau_eff]
        c = base.p * fixed if r.tau_eff == "population" else _expected_weights_by_enumeration(base.p, a, q, r.tau_eff)
        x_c = _minimiser(base, c / c.sum())
        means = [run_replicas(base, "fednova", solvers, work, T, seed=s, sampling="with-replacement",
                              clients_per_round=q, tau_eff=policy).mean_params[0] for s in (0, 1, 2)]
        dist = [np.linalg.norm(x - x_star) for x in means]
        assert (r.clients, r.rounds) == (q, T) and r.lr == pytest.approx(lr, rel=1e-14)
        assert r.distance == pytest.approx(np.mean(dist), rel=1e-12)
        assert r.stderr == pytest.approx(np.std(dist, ddof=1) / math.sqrt(3), rel=1e-10)
        assert r.predicted == pytest.approx(np.linalg.norm(x_c - x_star), rel=1e-8, abs=1e-12)
        assert r.off_prediction == pytest.approx(np.mean([np.linalg.norm(x - x_c) for x in means]), rel=1e-8)
        w = c / c.sum()
        assert r.chi2 == pytest.approx(float(np.sum((base.p - w) ** 2 / w)), rel=1e-8, abs=1e-15)
        assert r.step_scale == pytest.approx(c.sum() / fixed, rel=1e-12)
        np.testing.assert_allclose(r.averaged, np.array(means), rtol=1e-14)
        np.testing.assert_allclose(r.limit, x_c, rtol=1e-8)


def test_sampling_bias_refuses_full_participation_by_name():
    base, work = S.base_setup(seed=0, dim=2)
    with pytest.raises(ValueError, match="sampling_bias samples clients"):
        S.sampling_bias(base, work, [2], [10], scheme="full")
    with pytest.raises(ValueError, match="tau_effs must name at least one"):
        S.sampling_bias(base, work, [2], [10], tau_effs=[])


def _row(m, T, v, tau=1.0, algorithm="fednova"):
    return S.SpeedupRow(algorithm, m, T, tau, 0.1, v, 0.0)


def test_equal_budget_ratios_rtol_default_and_boundary():
    # budgets 100 and 107 (7% apart): one group at rtol 0.1, none at the default 0.05
    rows = [_row(4, 25, 1.0), _row(107, 1, 2.0)]
    assert S.equal_budget_ratios(rows) == []
    (group,) = S.equal_budget_ratios(rows, rtol=0.1)
    assert group[0] == pytest.approx(100) and group[1] == [(4, 25, 1.0), (107, 1, 2.0)] and group[2] == 2.0
    # exactly at rtol (6 / 4 - 1 = 0.5): within
    (group,) = S.equal_budget_ratios([_row(6, 1, 3.0), _row(4, 1, 2.0)], rtol=0.5)
    assert group[1] == [(4, 1, 2.0), (6, 1, 3.0)] and group[2] == 1.5
    # each budget is compared with its group's first; the other algorithm's cells stay out
    rows = [_row(100, 1, 1.0), _row(104, 1, 4.0), _row(108, 1, 2.0), _row(100, 1, 9.0, algorithm="fedavg")]
    groups = S.equal_budget_ratios(rows)
    assert [g[1] for g in groups] == [[(100, 1, 1.0), (104, 1, 4.0)]] and groups[0][2] == 4.0
    (avg,) = S.equal_budget_ratios(rows + [_row(101, 1, 3.0, algorithm="fedavg")], algorithm="fedavg")
    assert avg[2] == 3.0


def test_summary_markdown_reports_the_last_row_and_the_worst_group():
    cons = [S.ConsistencyRow(100, 0.04, 0.15, 0.016, 0.46, 0.26, 0.18, 0.59, 0.70),
            S.ConsistencyRow(200, 0.03, 0.111, 0.01, 0.5, 0.2, 0.2, 0.58, 0.72),
            S.ConsistencyRow(400, 0.02, 0.086, 0.005, 0.54, 0.17, 0.29, 0.57, 0.73)]
    grid = [_row(4, 100, 0.2), _row(16, 25, 0.23)]
    groups = [(400.0, [(4, 100, 0.2), (16, 25, 0.23)], 1.15), (200.0, [(4, 50, 0.1), (8, 25, 0.3)], 3.0)]
    text = S.summary_markdown(cons, grid, 0.9, 0.5, -0.5, groups)
    assert "$T = 100, \\dots, 400$" in text and "from 0.15 to 0.086" in text and "stayed 0.54 from" in text
    assert "0.57" in text and "0.111" not in text
    assert "within a factor 3.00 at worst (m=4, T=50: 0.1; m=8, T=25: 0.3)" in text


def _srow(m, q, T, v, eff):
    return S.SamplingRow("fednova", "with-replacement", m, q, T, 6.5, 0.01, v, 0.01, eff)


def _brow(q, T, lr, choice, d, pred, off):
    return S.BiasRow(q, T, lr, choice, d, 0.01, pred, off, 0.08, 1.0, np.zeros((2, 3)), np.zeros(3))


def test_sampling_summary_worst_group_and_incomplete_bias_rows():
    big = [_srow(256, 4, 1024, 0.2, 3.95), _srow(256, 16, 1024, 0.1, 15.1)]
    small = [_srow(4, 4, 1024, 0.3, 2.29), _srow(4, 16, 1024, 0.25, 3.37)]
    groups = [(1e4, [(4, 1024, 0.2), (16, 256, 0.19)], 1.05), (5e3, [(4, 512, 0.1), (8, 256, 0.25)], 2.5)]
    text = S.sampling_summary(big, small, -0.5, groups, 2.0, 1.2, 4, 16)
    assert "within a factor 2.50 at worst (q=4, T=512: 0.1; q=8, T=256: 0.25)" in text
    # App. H's rows at one T only, and no population rows: the parts that lack a row are left out
    bias = [_brow(2, 1000, 0.008, "participants", 0.284, 0.304, 0.086),
            _brow(2, 4000, 0.004, "participants", 0.293, 0.304, 0.033),
            _brow(2, 1000, 0.008, "selected_p", 0.25, 0.261, 0.078)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "must be fixed" not in text
    bias += [_brow(2, 1000, 0.008, "population", 0.064, 0.0, 0.064), _brow(2, 4000, 0.004, "population", 0.031, 0.0, 0.031)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "0.284 → 0.293" in text and "App. H" not in text and "0.064 → 0.031" in text and "fell 2×" in text


def test_check_against_reference_takes_any_iterable():
    base, work = S.base_setup(seed=2, dim=2)
    check = S.check_against_reference(base, work, iter(S.make_solvers(0.02)), 3, replicas=2)
    assert check.max_difference < 1e-12  # (its wall times are reported, never asserted on)


def test_sampling_summary_with_one_row_per_population():
    text = S.sampling_summary([_srow(64, 8, 100, 0.2, 7.0)], [_srow(4, 8, 100, 0.3, 2.9)], -0.5, [], 1.5, 1.1, 8, 8)
    assert "$m = 64$" in text and "$m = 4$" in text and "7 → 7" in text


# ---------------------------- sampling_summary's _summary_population: review and mutants of f37e303..6eb7195
def _row_q(m, q, value, eff, scheme="with-replacement", rounds=1024):
    from fedlib.experiments import speedup as S

    return S.SamplingRow("fednova", scheme, m, q, rounds, 6.5, 0.01, value, 0.01, eff)


def test_sampling_summary_names_the_bad_q_eff_among_several_rows():
    """Two rows at q = 16 (two values of T), the second without q_eff: the message printed the first row's
    good value ('has effective_clients 15.1, not a number > 0')."""
    from fedlib.experiments import speedup as S

    big = [_row_q(256, 4, 0.2, 3.95), _row_q(256, 16, 0.1, 15.1), _row_q(256, 16, 0.1, float("nan"), rounds=4096)]
    small = [_row_q(4, 4, 0.3, 2.29), _row_q(4, 16, 0.25, 3.4)]
    with pytest.raises(ValueError, match=r"^big: the row with q = 16 has effective_clients nan, not a number > 0"):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)


@pytest.mark.parametrize("big, message", [
    ([(256, 4), (256, 16)], r"^big must be a non-empty sequence of SamplingRow \(sampling_grid's rows\)$"),
    ([_row_q(256, 4, 0.2, 3.95), _row_q(256, 16, 0.1, 0.0)], r"^big: the row with q = 16 has effective_clients 0\.0"),
    ([_row_q(256, 4, 0.2, math.inf), _row_q(256, 16, 0.1, 15.1)], r"^big: the row with q = 4 has effective_clients inf"),
])
def test_sampling_summary_refuses_other_rows_and_q_eff_zero_or_infinite(big, message):
    """Kills SS2 (the ``isinstance(r, SamplingRow)`` check dropped: plain tuples failed with an
    AttributeError), SS6 (``effective_clients > 0`` -> ``>= 0``: 'q_eff 3.95 → 0') and SS7 (``isfinite``
    dropped: 'q_eff inf → 15.1')."""
    from fedlib.experiments import speedup as S

    small = [_row_q(4, 4, 0.3, 2.29), _row_q(4, 16, 0.25, 3.4)]
    with pytest.raises(ValueError, match=message):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)


# ------------------------------------------------------------------------------ chapter 8: no seeds, no pair
def test_sampling_summary_states_no_paired_error_for_rows_without_seeds():
    """Rows with no averaged iterates (0 seeds) share the shape (0, d), and their limits differ, but there
    is nothing to average: the sentence must be left out (mutant: the len(averaged) check dropped, which
    printed the mean of nothing, nan)."""
    from fedlib.experiments import speedup as S

    srow = lambda m, q, value, eff: S.SamplingRow("fednova", "with-replacement", m, q, 1024, 6.5, 0.01, value, 0.01,
                                                  eff)
    brow = lambda T, choice, averaged, limit: S.BiasRow(2, T, 10.0 / T, choice, 0.3, 0.01, 0.3, 0.05, 0.08, 1.0,
                                                        np.asarray(averaged, dtype=float), np.asarray(limit, dtype=float))
    none = np.zeros((0, 3))
    bias = [brow(T, choice, none, np.ones(3) if choice != "population" else np.zeros(3))
            for T in (1000, 4000) for choice in ("population", "participants", "selected_p")]
    big, small = [srow(256, 4, 0.2, 3.95), srow(256, 16, 0.1, 15.1)], [srow(4, 4, 0.3, 2.29), srow(4, 16, 0.25, 3.4)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "must be fixed" in text and "Paired" not in text and "nan" not in text


# ----------------------------------------------------- speedup, chapter 8's conditions: mutants of 8bd9827..
def test_chapter8_conditions_use_the_problems_own_weights_p():
    """beta^2 of Assumption 3 is for the weights p of the problem (sum_i p_i H_i^2 <= beta^2 H~^2, H~ =
    sum_i p_i H_i): with p = (0.1, 0.2, 0.3, 0.4) it is not the uniform weights' value. Computed here as
    the largest generalised eigenvalue of (sum p H^2, H~^2) (positive definite H_i), and tau_eff as
    sum_i p_i E||a_i||_1 over client i's tau range and the four solvers."""
    import scipy.linalg

    from fedlib.experiments import speedup as S
    from fedlib.problems.quadratic import QuadraticProblem

    base, work = S.base_setup(seed=0, dim=3)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    problem = QuadraticProblem(base.H, base.e, p)

    def beta2_of(w):
        h = np.einsum("i,ijk->jk", w, base.H)
        h2 = np.einsum("i,ijk,ikl->jl", w, base.H, base.H)
        return max(1.0, scipy.linalg.eigh(h2, h @ h, eigvals_only=True).max())

    assert abs(beta2_of(p) - beta2_of(np.full(4, 0.25))) > 1e-3  # the weights matter here
    solvers = S.make_solvers(0.01)
    got = S.sampling_step_conditions(problem, work, solvers, 4)
    assert got.beta2 == pytest.approx(beta2_of(p), rel=1e-10)
    means = [np.mean([s.a_vector(t).sum() for s in solvers for t in range(lo, hi + 1)])
             for lo, hi in zip(work.low, work.high)]
    assert got.tau_eff == pytest.approx(float(p @ np.array(means)), rel=1e-12)


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
class _ScriptedWork(RandomLocalWork):
    """Two SGD clients on the ranges 1..2 and 2..2: client 0's tau of round t is ``script[t]`` (no cycle), client
    1's is 2."""

    def __init__(self, script):
        super().__init__([1, 2], [2, 2], num_solvers=1)
        object.__setattr__(self, "script", tuple(script))

    def draw(self, round_index):
        return np.array([self.script[round_index], 2]), np.zeros(2, dtype=np.int64)


def test_drawn_weights_reads_the_draws_of_rounds_0_to_rounds_minus_1():
    r"""``drawn_weights`` averages the draws ``work.draw(t)`` of the rounds ``t = 0 .. rounds - 1`` (its docstring:
    the first ``rounds`` draws). p = (1/2, 1/2), SGD (||a||_1 = tau): client 0 draws 1, 1, 1 then 2, client 1
    always 2. Over 3 rounds w^_0 = (1/2 * 1) / (1/2 * 1 + 1/2 * 2) = 1/3, with no spread (stderr 0); over 4,
    (1/2 * 5/4) / (1/2 * 5/4 + 1) = 5/13 (mutant SP10, ``work.draw(t + 1)``: rounds 1..3 give 1, 1, 2 and
    w^_0 = (2/3) / (5/3) = 2/5)."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.zeros((2, 1)), p=np.array([0.5, 0.5]))
    three = S.drawn_weights(prob, _ScriptedWork([1, 1, 1, 2]), [sgd(0.1)], 3)
    np.testing.assert_allclose(three.measured, [1 / 3, 2 / 3], rtol=1e-14)
    assert three.stderr.tolist() == [0.0, 0.0] and three.rounds == 3
    four = S.drawn_weights(prob, _ScriptedWork([1, 1, 1, 2]), [sgd(0.1)], 4)
    np.testing.assert_allclose(four.measured, [5 / 13, 8 / 13], rtol=1e-14)


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
def test_plot_loss_vs_time_refuses_three_axes():
    """plot_loss_vs_time draws exactly two panels: three axes are refused too, before anything is drawn (mutant
    ST2, ``len(axes) != 2`` -> ``< 2``, drew two panels and left the third empty)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3)
    try:
        with pytest.raises(ValueError, match=r"^axes: plot_loss_vs_time draws two panels \(seconds, rounds\), got 3 axes$"):
            ST.plot_loss_vs_time(axes, {"fedavg-fixed-time": _curves([1.0, 0.5, 0.25])})
        assert all(not ax.lines for ax in axes)
    finally:
        plt.close(fig)


def test_summary_writes_fednovas_exact_zero_chi2_as_zero():
    """FedNova's chi^2(p||w) is 0 (its weights are p); the summary writes an exact 0 as '0' (``:.3g``), not
    '0.0e+00' (mutant ST4, the old ``:.1e``); FedAvg's keeps three decimals."""
    c = {k: ST.StragglerCurves(k, (0,), np.array([[2.0, 1.0, 0.5]]), np.array([[0.0, 1.0, 2.0]]),
                               np.array([[0.1, 0.2]]), np.array([3.0]))
         for k in ST.STRATEGIES}
    c["fednova-fixed-time"] = c["fednova-fixed-time"]._replace(chi2=np.zeros((1, 2)))
    ends = {k: ST.smoothed_end_loss(v, 1.0) for k, v in c.items()}
    times = {k: np.array([1.0]) for k in c}
    text = ST.summary_markdown(c, 2.0, 0.6, times, ends, None, end_fraction=1.0)
    assert "$\\chi^2(p\\|w)$ 0.150 on average; FedNova's is 0)." in text


# ----------------------------------- speedup._factory_solvers: mutants of f929b39..780545c (speedup.py, adf2d8b)
def test_solver_factory_gives_exactly_one_solver_per_solver_number_in_any_iterable():
    """The sweeps take solver_factory(lr) as any iterable of solvers, a generator too (as list(...) did before
    adf2d8b), and refuse one that gives more solvers than the work draws among (4 in base_setup's), naming
    solver_factory, as they refuse fewer: the extra ones would never be drawn. Mutants of f929b39..780545c: SF1
    (``len(solvers) != n`` -> ``<``: five taken), SF7 (``list(...)`` dropped: a generator's len a TypeError)."""
    problem, work = S.base_setup(seed=0, dim=3)
    five = {"solver_factory": lambda lr: [sgd(lr)] * 5}
    said = r"^solver_factory: work draws among 4 solvers, solver_factory\([0-9.e-]+\) gave 5$"
    for call in (lambda kw: S.speedup_grid(problem, work, [1], [2], replicas=1, **kw),
                 lambda kw: S.consistency_sweep(problem, work, [2], **kw),
                 lambda kw: S.sampling_grid(problem, work, [1], [2], [2], **kw),
                 lambda kw: S.sampling_bias(problem, work, [2], [2], **kw)):
        with pytest.raises(ValueError, match=said):
            call(five)
    listed = S.consistency_sweep(problem, work, [2], solver_factory=S.make_solvers)
    generated = S.consistency_sweep(problem, work, [2], solver_factory=lambda lr: (s for s in S.make_solvers(lr)))
    assert generated == listed


# ---------------------------- equal budgets among cells with T >= k m (chapter 8, full seed 16)
def test_equal_budget_ratios_min_rounds_per_client_keeps_t_at_least_k_m():
    """At the full profile, seed 16, the m = 64, T = 256 cell (T = 4m; the bound's m / (tau T) terms 16 times those
    of m = 4, T = 4096) was 1.69 times the m = 4 cell of its budget: chapter 8 compares cells with T >= 16 m."""
    rows = [_row(4, 4096, 0.0778), _row(16, 1024, 0.0848), _row(64, 256, 0.131), _row(16, 4096, 0.04),
            _row(64, 1024, 0.045), _row(64, 4096, 0.02)]
    assert [round(g[2], 3) for g in S.equal_budget_ratios(rows)] == [1.684, 1.125]
    groups = S.equal_budget_ratios(rows, min_rounds_per_client=16)
    assert [g[1] for g in groups] == [[(4, 4096, 0.0778), (16, 1024, 0.0848)], [(16, 4096, 0.04), (64, 1024, 0.045)]]
    assert groups[0][2] == pytest.approx(0.0848 / 0.0778)
    # T = k m exactly is kept; one cell over the line drops the group it would leave alone
    assert len(S.equal_budget_ratios(rows, min_rounds_per_client=16.0001)) == 1
    assert S.equal_budget_ratios(rows, min_rounds_per_client=65) == []  # only m = 4, T = 4096 left in its group
    with pytest.raises(ValueError, match="min_rounds_per_client"):
        S.equal_budget_ratios(rows, min_rounds_per_client=-1)


def test_equal_budget_table_marks_the_cells_left_out():
    rows = [_row(4, 4096, 0.0778), _row(16, 1024, 0.0848), _row(64, 256, 0.131), _row(4, 256, 0.4), _row(16, 64, 0.5)]
    table = S.equal_budget_table(rows, 16)
    assert [r[0] for r in table] == [1024.0, 16384.0]
    assert table[0][1] == "m=4, T=256: 0.4; m=16, T=64: 0.5 (not compared)" and table[0][2] == 1.25
    assert table[0][3] == "—"  # one cell left: nothing compared
    assert table[1][1] == "m=4, T=4096: 0.0778; m=16, T=1024: 0.0848; m=64, T=256: 0.131 (not compared)"
    assert table[1][2] == pytest.approx(0.131 / 0.0778) and table[1][3] == pytest.approx(0.0848 / 0.0778)
    assert S.equal_budget_table(rows, 16, label="q")[0][1].startswith("q=4, T=256: 0.4; q=16")


def test_summaries_name_the_rounds_condition():
    cons = [S.ConsistencyRow(100, 0.1, 0.2, 0.01, 0.5, 0.3, 0.3, 0.6, 0.7)]
    grid = [_row(4, 100, 1.0), _row(16, 25, 1.1)]
    groups = S.equal_budget_ratios(grid)
    assert "Cells with the same $m\\tilde\\tau T$ — more" in S.summary_markdown(cons, grid, 1.0, 0.5, -0.5, groups)
    text = S.summary_markdown(cons, grid, 1.0, 0.5, -0.5, groups, min_rounds_per_client=16)
    assert "Cells with the same $m\\tilde\\tau T$ and $T \\ge 16m$ — more" in text
    big = [_srow(256, 4, 1024, 0.2, 3.95), _srow(256, 16, 1024, 0.1, 15.1)]
    small = [_srow(4, 4, 1024, 0.3, 2.29), _srow(4, 16, 1024, 0.25, 3.37)]
    sgroups = [(1e4, [(4, 4096, 0.2), (16, 1024, 0.21)], 1.05)]
    assert "same $q\\tilde\\tau T$ agreed" in S.sampling_summary(big, small, -0.5, sgroups, 2.0, 1.2, 4, 16)
    text = S.sampling_summary(big, small, -0.5, sgroups, 2.0, 1.2, 4, 16, min_rounds_per_client=16)
    assert "same $q\\tilde\\tau T$ and $T \\ge 16q$ agreed" in text


def test_left_out_not_above_names_the_groups_where_a_left_out_cell_is_not_higher():
    rows = [_row(4, 4096, 0.0778), _row(16, 1024, 0.0848), _row(64, 256, 0.131), _row(16, 4096, 0.04),
            _row(64, 1024, 0.045)]
    assert S.left_out_not_above(rows, 16) == []  # (64, 1024): T = 16 m is compared, not left out
    assert S.left_out_not_above(rows, 17) == []  # (64, 1024) left out and above (16, 4096)
    low = rows[:2] + [_row(64, 256, 0.0848)] + rows[3:]  # equal to the larger compared cell: not above
    assert S.left_out_not_above(low, 16) == [(16384.0, [(4, 4096, 0.0778), (16, 1024, 0.0848), (64, 256, 0.0848)])]
    # a group with nothing compared, or nothing left out, is not checked
    assert S.left_out_not_above([_row(64, 256, 0.01), _row(16, 1024, 0.02)], 1000) == []
    assert S.left_out_not_above([_row(64, 256, 0.01), _row(16, 1024, 0.02)], 0) == []


def test_left_out_ratios_smallest_left_out_over_largest_compared():
    rows = [_row(4, 4096, 0.0778), _row(16, 1024, 0.0848), _row(64, 256, 0.131), _row(16, 4096, 0.04),
            _row(64, 1024, 0.045)]
    ((budget, cells, ratio),) = S.left_out_ratios(rows, 16)
    assert budget == 16384.0 and len(cells) == 3 and ratio == pytest.approx(0.131 / 0.0848)
    both = S.left_out_ratios(rows, 17)  # (64, 1024) left out as well
    assert [round(r, 4) for _, _, r in both] == [round(0.131 / 0.0848, 4), round(0.045 / 0.04, 4)]
    assert S.left_out_ratios(rows, 0) == [] and S.left_out_ratios(rows, 2000) == []

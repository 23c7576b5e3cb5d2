"""Behaviour of fedlib.engines.batched (run_batched, run_reference, run_engine, minibatch_indices,
resolve_device) that the engine-equality tests do not pin: argument checks and their boundaries,
the round a divergence names, checkpoints resumed on either backend, per-round hooks and records,
the generic (fast=False) path with a decaying step size, and the single-client fast path
(underflow redo, a fresh process). Every number is checked against run_reference / run_sequential
or by hand.

Mutants of efe3bcd..52ae29d, fedlib/engines/batched.py (pass described in tests/README.md, Mutation passes):
  B1 batched: _round_lr unchecked.
  killed by the suite.

Mutants of 37f92d9..d2bb791 (fedlib/engines/batched.py) (pass described in tests/README.md, Mutation passes):
  killed by the suite: B1 minibatch_indices takes any rng; B2 EpochBatcher num_samples minimum 0; B3 step -1
  on the fast path; B4 / B6 client m in range (fast path / checked path); B5 a bool client; B7 on_round_end
  probed with 2 arguments; B8 on_round_end unchecked; B9 evaluate / fast unchecked; B10 comm unchecked
  (tests/test_distributed_state_checks.py); B11 on_round_end gets the ungathered variates
  (tests/test_distributed.py); B12 ``on_round_end is None`` -> ``is not None``; B13 run_reference's fast
  unchecked; B14 no check_participant_steps; B15 run_reference's hooks unchecked.

Mutants of 2e0d04d..fb2fbe6 (fedlib/engines/batched.py: DivergenceError's round_index check, run_reference's one
run_sequential call per round, run_batched's packed checked params) (pass described in tests/README.md, Mutation
passes):
  D1 round_index minimum -1 -> 0; D2 -> -2; D3 ``int(round_index)`` again. B1 run_sequential's first_round t -> 0;
  B2 a round's metrics named round t + 1; B3 the initial metrics named round 0; B4 a FloatingPointError without
  "round N" named round t + 1; B5 the record's lr of round 0; B6 a new EpochBatcher each round; B7 callback after the
  last round (the code before); B8 no initial metrics with rounds = 0. K2 (run_batched) ``pack_params(x0)`` again.
  killed by the suite: D1-D3, B1-B3, B5, B7, B8, K2. equivalent: B6 (EpochBatcher draws from generator(seed,
  "batches", round, client) and drops its cache each round: a batcher per round draws the same batches). left
  alive: B4 (apply's and the server's FloatingPointErrors all name their round; only an own step raising one
  without "round N" would see it). Later: B4 is killed by test_an_own_step_that_diverges_names_its_round (an own step
  raising FloatingPointError in round 2), which also found run_batched(fast=False) letting that error through
  without a round (fixed with it).

Mutants of 0571233~1..165a974 (fedlib/engines/batched.py: minibatch_indices' steps by check_count) (pass described in
tests/README.md, Mutation passes):
  BA1 by check_int; BA2 minimum 1. killed by the suite: BA1, BA2.

Mutants of 1112cf7..24d535b (fedlib/engines/batched.py: _check_common's check_schedule_size, run_batched's owner)
(pass described in tests/README.md, Mutation passes):
  BA1 _check_common's check dropped (round 0's 'one step count per client', or check_epoch_schedule's 'counts steps
  for other client sizes'); BA2 its owner 'p'; BA3 run_batched's rounds with owner 'p' (tests/test_batched_engine.py
  takes either, as run_reference names p). killed here: BA1, BA2, BA3.

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/engines/batched.py, 61c3eb9:
run_batched's check_round_lr call) (pass described in tests/README.md, Mutation passes):
  RL22 the call dropped; RL23 ``algorithm.variance is None``; RL24 a new OwnStepChecks each round; RL25
  algorithm.solver probed for the round's solver; RL26 round 0 named; RL27 the probe after the local phase.
  killed by the suite: RL22, RL25, RL26. killed here: RL23, RL24, RL27.
Mutants of daa3d34 (fedlib/engines/batched.py: _local_phase's label-written one-hot windows, the 0-d step sizes,
bisect window bounds, _steps_fast's single-client path and S scratch; fedlib/problems/logistic.py: _DOT,
_packed_grad_numpy_one's S path, _packed_sgd_steps_numpy_one) (pass described in tests/README.md, Mutation passes):
  PF1 window bound by bisect_left; PF2 by offs[k0] + max_rows + 1; PF3 without its - 1; PF4 k1 without its lower
  bound k0 + 1; PF5 a window's last row offs[k1 - 1] + 1; PF6 no Yw.fill(0.0); PF7 Yw.fill(-0.0); PF8 ybase stride
  C - 1; PF9 stride B; PF10 the labels of rows k0.. (not r0..); PF11 the weights of rows k0..; PF12 the one-hot
  without the weights; PF13 the positions one sample row on (ybase[B:]); PF14 labels = None (numpy gathers the
  one-hot rows: the code before); PF15 torch given the labels too; PF16 cached[0] / cached[2] swapped (numpy floats,
  torch 0-d arrays); PF17 numpy's step sizes from cached[1] (the a_norms); PF18 the 0-d step sizes one step on;
  PF19 in float32; PF20 writeable; PF21 k_one by bisect_right; PF22 k_one the first step with <= 2 clients; PF23
  k_one one step late; PF24 one step early; PF25 searched from k0 + 1; PF26 _negative the identity; PF27 the
  single-client path entered with 2 clients at the window's end; PF28 the SGD loop given l2 = 0; PF29 its step sizes
  from k0 (not k_one); PF30 S aliased to Z; PF31 the row sums one step short; PF32 the underflow redo without S; PF33
  the redo from the advanced parameters (no th[...] = start); PF34 _DOT = np.matmul; PF35 _packed_grad_numpy_one's S
  not refreshed; PF36 its S branches swapped; PF37 the SGD loop's S not refreshed; PF38 its shift Z[0, 0], not the
  maximum; PF39 argmax of the first row only; PF40 argmax on a stale copy of Z (flatten); PF41 row sums by Z.sum;
  PF42 every step divided by the first step's sums; PF43 the first step's labels; PF44 l2 on the bias row too; PF45
  l2 added after the lr multiply; PF46 l2 dropped.
  killed by the suite: PF2, PF3, PF5, PF6, PF8-PF13, PF15-PF19, PF22, PF24, PF26-PF31, PF33, PF35-PF46. killed here:
  PF20, PF21, PF23, PF25. equivalent (each also gave the unmutated bits in 60 runs: 5 algorithms and solvers, fixed
  steps and epochs, numpy and torch, 3 window sizes): PF1 (a window shorter than fits: the steps' arithmetic does
  not depend on the windows, and an underflow redo starts from its window's start); PF4 (unreachable: max_rows >= q
  >= active[k0], so bisect_right already gives k1 >= k0 + 1); PF7 (the zeros enter only Z - Yw, where Z is exp
  times a scale w / sum >= 0, so never -0.0, and z - (-0.0) = z - (+0.0) for every other z); PF14 (the code before
  the change, which claims and the labels test checks the same bits); PF32 (S and the broadcasting multiply give
  the same products: test_speed_equivalence.py's scratch test); PF34 (np.matmul of these 2-d / 2-d-by-1-d float64
  operands calls the same BLAS products as np.dot on this numpy 2.4 / OpenBLAS: every bit the same). PF21, PF23 and
  PF25 change no number either (the steps they take off the single-client path run on the stacked kernel, the same
  bits): the test here checks that every step with one client left runs on that path.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.data.clients import FederatedDataset
from fedlib.engines import batched
from fedlib.engines.batched import (DivergenceError, minibatch_indices, resolve_device, run_batched, run_engine,
                                    run_reference)
from fedlib.problems import logistic
from fedlib.problems.logistic import LogisticProblem
from fedlib.rng import generator
from fedlib.schedules import FixedEpochs, FixedSteps
from fedlib.server import momentum
from fedlib.solvers import LocalSolver, decayed_sgd, momentum_sgd, sgd

B = 4
ENGINES = ["batched", "reference"]


@pytest.fixture(scope="module")
def prob():
    # 3 clients with 10, 8, 13 training samples, 60 features, 10 classes
    return LogisticProblem(synthetic(num_clients=3, seed=1, num_samples=[12, 9, 15]), l2=0.001)


def _same(r1, r2, tol=1e-10):
    assert len(r1.history) == len(r2.history)
    for h1, h2 in zip(r1.history, r2.history):
        assert h1["clients"] == h2["clients"] and h1["local_steps"] == h2["local_steps"]
        assert h1["train_loss"] == pytest.approx(h2["train_loss"], abs=tol, rel=0)
        np.testing.assert_allclose(h1["a_norms"], h2["a_norms"], rtol=1e-12)
    for k in ("W", "b"):
        np.testing.assert_allclose(r1.params[k], r2.params[k], atol=tol, rtol=0)


# ----------------------------------------------------------------------------- minibatch_indices
def test_minibatch_indices_smallest_arguments_and_zero_steps():
    """One sample in batches of one: every step is that sample; zero steps give empty arrays
    and draw no permutation from the caller's generator."""
    idx, counts = minibatch_indices(1, 1, 3, generator(0, "batches", 0, 0))
    assert idx.tolist() == [[0], [0], [0]] and counts.tolist() == [1, 1, 1]
    rng = generator(5, "batches", 0, 0)
    idx, counts = minibatch_indices(4, 2, 0, rng)
    assert idx.shape == (0, 2) and counts.shape == (0,)
    assert rng.random() == generator(5, "batches", 0, 0).random()


@pytest.mark.parametrize("args,name", [((0, 2, 3), "num_samples"), ((4, 0, 3), "batch_size"),
                                       ((4, 2, -1), "steps"), ((4, 2, 2.5), "steps")])
def test_minibatch_indices_checks_its_arguments(args, name):
    """num_samples >= 1, batch_size >= 1, steps a whole number >= 0, each named when wrong."""
    with pytest.raises(ValueError, match=name):
        minibatch_indices(*args, generator(0, "batches", 0, 0))


# ----------------------------------------------------------------------------- devices and backends
def test_resolve_device():
    """numpy runs on "cpu" only; torch takes any torch device, defaults to CUDA when torch sees a
    GPU, and refuses a non-device or a CUDA device without a GPU."""
    torch = pytest.importorskip("torch")
    assert resolve_device("numpy", None) == "cpu" and resolve_device("numpy", "cpu") == "cpu"
    with pytest.raises(ValueError, match="the numpy backend runs on the CPU only"):
        resolve_device("numpy", "meta")
    assert resolve_device("torch", None) == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("torch", "meta") == "meta" and resolve_device("torch", "cpu") == "cpu"
    with pytest.raises(ValueError, match="not a torch device: 'tpu'"):
        resolve_device("torch", "tpu")
    if torch.cuda.is_available():
        assert resolve_device("torch", "cuda:0") == "cuda:0"
    else:
        with pytest.raises(ValueError, match="torch sees no GPU"):
            resolve_device("torch", "cuda:0")


def test_server_state_lives_on_the_chosen_backend(prob):
    """The batched engine's final server state is packed on its backend: a numpy array for
    backend='numpy', a torch tensor for 'torch'; the returned params are numpy either way."""
    torch = pytest.importorskip("torch")
    algo = make_algorithm("fedavg", sgd(0.05))
    kw = dict(batch_size=B, evaluate=False)
    r_np = run_batched(algo, prob, FixedSteps([2, 1, 3]), 1, **kw)
    r_t = run_batched(algo, prob, FixedSteps([2, 1, 3]), 1, backend="torch", device="cpu", **kw)
    assert isinstance(r_np.state.params, np.ndarray) and isinstance(r_t.state.params, torch.Tensor)
    assert isinstance(r_t.params["W"], np.ndarray)
    np.testing.assert_allclose(r_np.params["W"], r_t.params["W"], atol=1e-12)


def test_run_engine_runs_the_engine_it_names(prob):
    """run_engine('batched') is run_batched (packed server state), 'reference' is the per-client
    loop (run_sequential's {'W', 'b'} state)."""
    algo = make_algorithm("fedavg", sgd(0.05))
    a = run_engine("batched", algo, prob, FixedSteps([2, 1, 3]), 1, batch_size=B)
    b = run_engine("reference", algo, prob, FixedSteps([2, 1, 3]), 1, batch_size=B)
    assert isinstance(a.state.params, np.ndarray) and a.state.params.shape == (61, 10)
    assert isinstance(b.state.params, dict) and set(b.state.params) == {"W", "b"}
    _same(a, b)


# ----------------------------------------------------------------------------- argument checks
class _Steps:
    """A hand-written schedule: the same step counts every round (0 allowed, unlike FixedSteps)."""

    def __init__(self, steps):
        self.steps = steps

    def local_steps(self, t):
        return np.array(self.steps)


BAD = [
    (dict(algorithm="fedavg"), "algorithm must be a fedlib FederatedAlgorithm, got str"),
    (dict(problem="data"), "problem must be a LogisticProblem, got str"),
    (dict(rounds=-1), "rounds"),
    (dict(batch_size=0), "batch_size"),
    (dict(seed=1.5), "seed"),
    (dict(sampling="sometimes"), "sampling"),
    (dict(schedule=object()), r"schedule must be an object with local_steps\(round\)"),
    (dict(sampling="uniform"), "clients_per_round is required"),
    (dict(sampling="uniform", clients_per_round=0), "clients_per_round"),
    (dict(sampling="uniform", clients_per_round=4), "cannot sample 4 of 3 clients"),
    (dict(clients_per_round=2), "full participation takes every client"),
    (dict(params={"W": np.zeros((60, 3)), "b": np.zeros(10)}), "params"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bad,match", BAD, ids=[m for _, m in BAD])
def test_both_engines_refuse_bad_arguments(prob, engine, bad, match):
    """Each wrong argument is a ValueError naming it, before any training, in both engines."""
    kw = dict(algorithm=make_algorithm("fedavg", sgd(0.05)), problem=prob, schedule=FixedSteps([2, 1, 3]),
              rounds=1, batch_size=B)
    kw.update(bad)
    args = [kw.pop(k) for k in ("algorithm", "problem", "schedule", "rounds")]
    with pytest.raises(ValueError, match=match):
        run_engine(engine, *args, **kw)


@pytest.mark.parametrize("engine,match", [
    ("batched", r"schedule: round 0 gives participant client 1 0 local steps \(need >= 1"),
    ("reference", r"schedule: round 0 gives participant client 1 0 local steps \(need >= 1")])
def test_a_participant_with_no_local_step_is_refused(prob, engine, match):
    """A schedule may give a client 0 steps (it then cannot take part); a participant with 0
    steps is a ValueError, not an update with some other client's ||a_i||."""
    with pytest.raises(ValueError, match=match):
        run_engine(engine, make_algorithm("fednova", sgd(0.05)), prob, _Steps([2, 0, 3]), 1, batch_size=B)


@pytest.mark.parametrize("engine", ENGINES)
def test_smallest_valid_arguments_run(prob, engine):
    """rounds=0 gives the initial metrics (zero parameters: loss log 10) and no rounds;
    batch_size=1 and clients_per_round 1 or m (uniform) or more than m (with replacement) run."""
    algo = make_algorithm("fedavg", sgd(0.05))
    sched = FixedSteps([2, 1, 3])
    r0 = run_engine(engine, algo, prob, sched, 0, batch_size=B)
    assert r0.history == [] and r0.initial["train_loss"] == pytest.approx(np.log(10), rel=1e-12)
    r1 = run_engine(engine, algo, prob, sched, 1, batch_size=1, evaluate=False)
    assert r1.history[0]["local_steps"] == [2, 1, 3]
    for sampling, q, size in (("uniform", 1, 1), ("uniform", 3, 3), ("with-replacement", 5, None)):
        r = run_engine(engine, algo, prob, sched, 1, batch_size=B, sampling=sampling, clients_per_round=q,
                       evaluate=False)
        if size is not None:
            assert len(r.history[0]["clients"]) == size
        else:
            assert 1 <= len(r.history[0]["clients"]) <= 3


# ----------------------------------------------------------------------------- divergence
@pytest.mark.parametrize("engine", ENGINES)
def test_divergence_names_the_round_of_each_cause(prob, engine, capfd):
    """A non-finite loss at the start is round -1, a non-finite training loss after round 0
    (lr 1e307: finite update, logits overflow) is round 0, a non-finite update in round 0
    (lr 1e308) is round 0, and so is an aggregate that overflows from finite changes (FedNova, steps [1, 1, 8],
    lr 6e307, evaluate=False: the two one-step clients' changes, scaled by tau_eff / a_i = 10/3, sum past float64)
    — all DivergenceError, whichever engine, and nothing else: no RuntimeWarning (as errors here) and nothing printed.
    Each case overflows inside one of the engine's errstate(all="ignore") (the initial and round metrics, the local
    phase, apply, run_reference's run_sequential; each set to "raise" changes a message below). Before, the test ran
    under its own errstate(all="ignore") and looked at the error only: each of them set to "print" (mutants EP5-EP8
    of the negative-assertion pass: numpy's 'Warning: overflow encountered in ...' on the C stderr) passed."""
    import warnings

    sched = FixedSteps([1, 1, 1])
    huge = {"W": np.zeros((60, 10)), "b": np.r_[1e308, -1e308, np.zeros(8)]}  # loss 1e308 - (-1e308) = inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError, match="training loss is inf") as info:
            run_engine(engine, make_algorithm("fedavg", sgd(0.05)), prob, sched, 2, batch_size=B, params=huge)
        assert info.value.round == -1
        with pytest.raises(DivergenceError, match=r"diverged in round 0: the training loss is nan") as info:
            run_engine(engine, make_algorithm("fedavg", sgd(1e307)), prob, sched, 3, batch_size=B)
        assert info.value.round == 0
        with pytest.raises(DivergenceError, match=r"diverged in round 0: .*not finite") as info:
            run_engine(engine, make_algorithm("fedavg", sgd(1e308)), prob, sched, 3, batch_size=B)
        assert info.value.round == 0
        with pytest.raises(DivergenceError) as info:
            run_engine(engine, make_algorithm("fednova", sgd(6e307)), prob, FixedSteps([1, 1, 8]), 3, batch_size=B,
                       evaluate=False)
        assert info.value.round == 0
        assert str(info.value) == ("diverged in round 0: the aggregated update is not finite (diverged): the change of "
                                   "1 of the 3 participating clients, [2], holds NaN or inf (NaN or inf in their data "
                                   "or loss, or a learning rate too large for them)")
    assert capfd.readouterr() == ("", "")


class _OwnSGD(LocalSolver):
    """SGD as an own (leaf) step: fast=False on the batched engine."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        return super()._direction_and_params(x, g, u, x0, corr, lr_k, wd)


class _CheckedSGD(LocalSolver):
    """An own step that refuses a non-finite step itself, with a message that names no round."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        nx, nu = super()._direction_and_params(x, g, u, x0, corr, lr_k, wd)
        if not np.isfinite(nx).all():
            raise FloatingPointError("the local step is not finite")
        return nx, nu


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("solver, detail", [(_OwnSGD, "the aggregated update is not finite (diverged): the change of "
                                                      "3 of the 3 participating clients, [0, 1, 2], holds NaN or inf "
                                                      "(NaN or inf in their data or loss, or a learning rate too large "
                                                      "for them)"),
                                            (_CheckedSGD, "the local step is not finite")])
def test_an_own_step_that_diverges_names_its_round(prob, engine, solver, detail):
    """An own solver step that diverges in round 2 (lr 0.05 for rounds 0-1, then 1e308) stops either engine with a
    DivergenceError of round 2: an own step whose parameters turn non-finite by apply's error ("round 2: ..."), one
    that raises its own FloatingPointError naming no round by the engine's round. Mutant B4 of 2e0d04d..fb2fbe6
    (run_reference: round t + 1 for a FloatingPointError without "round N") said round 3; run_batched (fast=False)
    let that FloatingPointError through as it was, no DivergenceError and no round (fixed with this test)."""
    algo = make_algorithm("fedavg", solver(lr=0.05))
    with pytest.raises(DivergenceError) as info:
        run_engine(engine, algo, prob, FixedSteps([3, 2, 3]), 5, batch_size=B, fast=False,
                   lr_at=lambda t: 0.05 if t < 2 else 1e308)
    assert info.value.round == 2
    assert str(info.value) == f"diverged in round 2: {detail}"


# ----------------------------------------------------------------------------- records and hooks
@pytest.mark.parametrize("engine", ENGINES)
def test_records_callback_time_and_returned_copies(prob, engine):
    """The callback sees every record; time_s is the round's own wall time (within the call's);
    the initial metrics are those before round 0 (loss log 10 at zero parameters); the returned
    params are copies, not views of the final state."""
    algo = make_algorithm("fednova", sgd(0.05))
    seen = []
    start = time.perf_counter()
    run = run_engine(engine, algo, prob, FixedSteps([2, 1, 3]), 3, batch_size=B, callback=seen.append)
    elapsed = time.perf_counter() - start
    assert seen == run.history and [h["round"] for h in seen] == [0, 1, 2]
    assert all(0 <= h["time_s"] <= elapsed for h in run.history)
    assert run.initial["train_loss"] == pytest.approx(np.log(10), rel=1e-12)
    assert run.history[0]["train_loss"] < run.initial["train_loss"]
    state = run.state.params
    for k in ("W", "b"):
        assert not np.shares_memory(run.params[k], state if isinstance(state, np.ndarray) else state[k])


def test_on_round_end_is_called_after_every_round(prob):
    """on_round_end(state, history, initial) runs after each round with the state after it and
    the history so far (what a checkpoint writes)."""
    calls = []
    run = run_batched(make_algorithm("fedavg", sgd(0.05)), prob, FixedSteps([2, 1, 3]), 3, batch_size=B,
                      on_round_end=lambda s, h, i: calls.append((s.round, len(h), i["train_loss"])))
    assert calls == [(1, 1, run.initial["train_loss"]), (2, 2, run.initial["train_loss"]),
                     (3, 3, run.initial["train_loss"])]


# ----------------------------------------------------------------------------- resume
def _checkpoint(run):
    return {"state": run.state, "history": run.history, "initial": run.initial}


def test_resume_keeps_initial_metrics_and_server_momentum(prob):
    """Resuming from a checkpoint continues the run: the same parameters, records and initial
    metrics as the straight run, the server optimizer's momentum included; the checkpoint's
    arrays are not changed by the resumed run."""
    algo = make_algorithm("fednova", sgd(0.05), momentum(0.5))
    sched = FixedSteps([2, 1, 3])
    straight = run_batched(algo, prob, sched, 4, batch_size=B)
    first = run_batched(algo, prob, sched, 2, batch_size=B)
    doc = _checkpoint(first)
    saved = doc["state"].params.copy()
    resumed = run_batched(algo, prob, sched, 4, batch_size=B, resume=doc)
    assert resumed.initial == straight.initial and resumed.initial["train_loss"] == pytest.approx(np.log(10))
    _same(resumed, straight, tol=1e-13)
    assert np.array_equal(doc["state"].params, saved)


def test_a_numpy_checkpoint_resumes_on_the_torch_backend(prob):
    """A checkpoint (numpy arrays: parameters, control variates, server state) resumes under
    backend='torch' to the numbers of the straight numpy run."""
    pytest.importorskip("torch")
    algo = make_algorithm("scaffold", sgd(0.05), momentum(0.5))
    sched = FixedSteps([2, 1, 3])
    straight = run_batched(algo, prob, sched, 3, batch_size=B)
    first = run_batched(algo, prob, sched, 2, batch_size=B)
    resumed = run_batched(algo, prob, sched, 3, batch_size=B, resume=_checkpoint(first), backend="torch",
                          device="cpu")
    _same(resumed, straight)


def test_resume_checks_what_it_is_given_and_a_finished_run_resumes_to_itself(prob):
    """resume['state'] must be a ServerState, resume['history'] a list, the state for this
    problem's number of clients (each a ValueError saying so); a checkpoint with every round
    done resumes to the same run without training."""
    algo = make_algorithm("fedavg", sgd(0.05))
    sched = FixedSteps([2, 1, 3])
    done = run_batched(algo, prob, sched, 2, batch_size=B)
    doc = _checkpoint(done)
    with pytest.raises(ValueError, match=r"resume\['state'\] must be a fedlib.algorithms.ServerState, got dict"):
        run_batched(algo, prob, sched, 3, batch_size=B, resume={**doc, "state": dict(done.params)})
    with pytest.raises(ValueError, match=r"resume\['history'\] must be a list of round records, got dict"):
        run_batched(algo, prob, sched, 3, batch_size=B, resume={**doc, "history": {0: 0, 1: 1}})
    prob4 = LogisticProblem(synthetic(num_clients=4, seed=1, num_samples=[12, 9, 15, 10]), l2=0.001)
    with pytest.raises(ValueError, match="the saved state is for 3 clients, the problem has 4"):
        run_batched(algo, prob4, FixedSteps([2, 1, 3, 1]), 3, batch_size=B, resume=doc)
    again = run_batched(algo, prob, sched, 2, batch_size=B, resume=doc)
    assert again.history == done.history and again.initial == done.initial
    for k in ("W", "b"):
        assert np.array_equal(again.params[k], done.params[k])


# ----------------------------------------------------------------------------- the generic path
def test_generic_path_with_a_decaying_step_size_and_small_windows(prob, monkeypatch):
    """fast=False (LocalSolver.update on the stack) starts every client at local step 0, so a
    step size gamma**k within the round gives the per-client loop's numbers, also when the
    mini-batches are gathered one step at a time."""
    algo = make_algorithm("fednova", decayed_sgd(0.1, gamma=0.8))
    sched = FixedSteps([5, 3, 4])
    ref = run_reference(algo, prob, sched, 2, batch_size=B)
    monkeypatch.setattr(batched, "GATHER_BYTES", 1)  # one window per step
    generic = run_batched(algo, prob, sched, 2, batch_size=B, fast=False)
    _same(generic, ref)
    assert generic.history[0]["a_norms"] == pytest.approx([(1 - 0.8 ** t) / 0.2 for t in (5, 3, 4)], rel=1e-12)


# ----------------------------------------------------------------------------- the single-client fast path
@pytest.mark.parametrize("steps", [[2, 1, 1], [1, 1, 4], [1, 2, 1], [3, 3, 3]])
def test_batched_equals_the_loop_when_clients_stop_early(prob, steps):
    """However the participants' step counts end (all but one client stopping after step 0, or
    all stopping together), the batched run gives the per-client loop's numbers."""
    algo = make_algorithm("fedavg", sgd(0.05))
    fast = run_batched(algo, prob, FixedSteps(steps), 2, batch_size=B, seed=1)
    _same(fast, run_reference(algo, prob, FixedSteps(steps), 2, batch_size=B, seed=1))


def test_single_client_steps_in_a_fresh_process(prob, monkeypatch):
    """A run whose every step has one client (uniform sampling of 1) works before any other
    gradient was computed in the process (the kernel's ones-vector cache is empty) and gives
    the per-client loop's numbers."""
    monkeypatch.setattr(logistic, "_ONES", {})
    algo = make_algorithm("fedavg", sgd(0.05))
    kw = dict(batch_size=B, sampling="uniform", clients_per_round=1, seed=2)
    fast = run_batched(algo, prob, FixedSteps([3, 2, 4]), 2, **kw)
    _same(fast, run_reference(algo, prob, FixedSteps([3, 2, 4]), 2, **kw))


def test_single_client_steps_redo_underflowed_softmax_rows():
    """One client whose batches mix a sample with logits [1000, 0, 0] and samples with logits 0:
    after the shift by the batch maximum the small rows' softmax sums underflow (exp(-1000) = 0),
    and the engine redoes those steps with a per-row shift — the per-client loop's numbers."""
    x = np.array([[10.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0], [0.0, 0.5]])
    y = np.array([1, 0, 2, 1, 0])
    ds = FederatedDataset([x], [y], [x[:1]], [y[:1]], num_classes=3)
    prob1 = LogisticProblem(ds)
    params = {"W": np.array([[100.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), "b": np.zeros(3)}
    algo = make_algorithm("fedavg", sgd(0.01))
    kw = dict(batch_size=5, params=params, seed=0)
    fast = run_batched(algo, prob1, FixedSteps([6]), 2, **kw)
    ref = run_reference(algo, prob1, FixedSteps([6]), 2, **kw)
    assert np.isfinite(fast.history[-1]["train_loss"])
    _same(fast, ref, tol=1e-12)
    # the gradient of the first step moves the weights: the runs are not trivially equal
    assert not np.allclose(fast.params["W"], params["W"])


# ----------------------------------------------------------------------------- several ranks
class _ThreadComm:
    """A communicator for ranks run as threads of this process (the collectives of
    fedlib.distributed.Communicator over a shared list and a barrier)."""

    def __new__(cls, rank, world, shared, barrier):
        from fedlib.distributed import Communicator

        class Comm(Communicator):
            def _gather(self, obj):
                barrier.wait()
                shared[rank] = obj
                barrier.wait()
                out = list(shared)
                barrier.wait()
                return out

            def all_gather_object(self, obj):
                return self._gather(obj)

            def all_gather_array(self, x):
                return [np.array(a, copy=True) for a in self._gather(np.array(x, copy=True))]

            def barrier(self):
                barrier.wait()

        comm = Comm()
        comm.rank, comm.world_size = rank, world
        return comm


def test_each_rank_ends_with_every_clients_control_variate(prob):
    """With comm, each rank trains and updates only its own clients' c_i, and the returned state
    holds the full stack gathered from all ranks: SCAFFOLD on 2 ranks ends with the parameters
    and control variates of the one-process run."""
    import threading

    algo = make_algorithm("scaffold", sgd(0.05))
    sched = FixedSteps([2, 1, 3])
    one = run_batched(algo, prob, sched, 2, batch_size=B)
    shared, barrier, runs, errors = [None, None], threading.Barrier(2, timeout=30), [None, None], []

    def rank(r):
        try:
            runs[r] = run_batched(algo, prob, sched, 2, batch_size=B, comm=_ThreadComm(r, 2, shared, barrier))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for run in runs:
        np.testing.assert_allclose(run.params["W"], one.params["W"], atol=1e-12, rtol=0)
        np.testing.assert_allclose(run.state.variates.client, one.state.variates.client, atol=1e-12, rtol=0)
    assert all(np.any(c) for c in one.state.variates.client)  # every c_i was updated: not a comparison of zeros


def test_resume_names_a_state_without_its_number_of_clients(prob):
    """A state with num_clients None (built by hand, or read from a checkpoint older than the field) was
    refused as 'the saved state is for None clients, the problem has 3'; it is now named as such, with
    the remedy, and the remedied state resumes to the run it came from."""
    algo = make_algorithm("fedavg", sgd(0.05))
    sched = FixedSteps([2, 1, 3])
    done = run_batched(algo, prob, sched, 2, batch_size=B)
    doc = _checkpoint(done)
    old = {**doc, "state": doc["state"]._replace(num_clients=None)}
    with pytest.raises(ValueError, match=r"^resume: the saved state does not say its number of clients "
                                         r"\(num_clients is None.*state\._replace\(num_clients=3\)$"):
        run_batched(algo, prob, sched, 3, batch_size=B, resume=old)
    again = run_batched(algo, prob, sched, 2, batch_size=B,
                        resume={**old, "state": old["state"]._replace(num_clients=3)})
    assert again.history == done.history


# ----------------------------------------------------------------------------- mutants of 1112cf7..24d535b
class _Counted:
    """A schedule of the user's own: ``steps`` every round, ``num_clients`` if given (else none: the rounds check what
    it returns); counts its calls."""

    def __init__(self, steps, num_clients=None):
        self.steps, self.calls = np.asarray(steps), 0
        if num_clients is not None:
            self.num_clients = num_clients

    def local_steps(self, round_index):
        self.calls += 1
        return self.steps


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_refuse_a_schedule_for_another_number_of_clients_before_any_round(prob, engine):
    """A schedule built for 2 clients on the 3-client problem is refused before round 0 draws its steps, naming
    the problem; an epoch schedule counted for 2 clients gets this message too, not check_epoch_schedule's
    'counts steps for other client sizes (2 clients, the run has 3)'. Mutants BA1 (the check dropped: round 0's
    'one step count per client', or the epoch check's message) and BA2 ('p' for the problem, which run_batched
    is not given) of 1112cf7..24d535b."""
    fn = run_batched if engine == "batched" else run_reference
    algorithm = make_algorithm("fedavg", sgd(0.05))
    schedule = _Counted([2, 1], num_clients=2)
    for given in (schedule, FixedEpochs([12, 9], B, 1)):
        with pytest.raises(ValueError, match=r"^schedule is for 2 clients but the problem has 3$"):
            fn(algorithm, prob, given, 1, batch_size=B)
    assert schedule.calls == 0


def test_run_batched_names_the_problem_for_step_counts_of_another_length(prob):
    """A schedule without num_clients is checked round by round: two counts for the 3-client problem are refused at
    round 0 as '... (3 clients in the problem), got shape (2,)', the problem being where run_batched's m comes from
    (run_reference passes the rounds to run_sequential, whose message names its p). Mutant BA3 of
    1112cf7..24d535b: the round's check without its owner ('3 clients in p')."""
    with pytest.raises(ValueError, match=r"^schedule\.local_steps\(0\) must give one step count per client \(3 clients "
                                         r"in the problem\), got shape \(2,\)$"):
        run_batched(make_algorithm("fedavg", sgd(0.05)), prob, _Counted([2, 1]), 1, batch_size=B)


# ------------------------------------------ mutants of the 8996bdf pass (61c3eb9: run_batched's check_round_lr)
def test_run_batched_probes_a_round_lr_once_with_the_correction_before_the_local_phase():
    """run_batched(fast=False) with lr_at 0.1 in round 0, then 0.05: algorithm.solver.with_lr(0.05) is probed once
    (the 1-d probe's update calls at 0.05 are one probe's, counted by check_own_step itself; the training steps the
    clients' stack), with the algorithm's correction (SCAFFOLD: an own step that adds twice the correction at 0.05 is
    refused in round 1), before round 1's local phase (no stacked update at 0.05). Mutants of the 8996bdf pass: RL23
    (the correction not passed on), RL24 (a probe every round), RL27 (the probe after the local phase)."""
    from fedlib.solvers import check_own_step

    class Counted(LocalSolver):
        calls: list = []
        scale = False

        def update(self, state, grads):
            Counted.calls.append((self.lr, np.ndim(state.params)))
            if self.scale and state.correction is not None:
                state = state._replace(correction=state.correction * (0.1 / self.lr))
            return super().update(state, grads)

    class Scaled(Counted):
        scale = True

    prob = LogisticProblem(synthetic(num_clients=3, dim=5, num_classes=3, seed=0, num_samples=[12, 20, 30]))
    sched = FixedEpochs(prob.num_samples, 8, 1)
    decay = lambda t: 0.1 if t == 0 else 0.05  # noqa: E731
    check_own_step("solver", Counted(lr=0.05))
    one_probe = len(Counted.calls)
    assert one_probe > 0 and all(lr == 0.05 and ndim == 1 for lr, ndim in Counted.calls)
    algo = make_algorithm("fednova", Counted(lr=0.1))
    Counted.calls.clear()
    run_batched(algo, prob, sched, 4, batch_size=8, evaluate=False, fast=False, lr_at=decay)
    assert sum(call == (0.05, 1) for call in Counted.calls) == one_probe
    assert any(lr == 0.05 and ndim > 1 for lr, ndim in Counted.calls)  # rounds 1-3 trained at 0.05

    algo = make_algorithm("scaffold", Scaled(lr=0.1))
    Counted.calls.clear()
    with pytest.raises(ValueError, match=r"^algorithm\.solver\.with_lr\(0\.05\) \(round 1's lr\): Scaled is given a "
                                         r"control-variate correction"):
        run_batched(algo, prob, sched, 3, batch_size=8, evaluate=False, fast=False, lr_at=decay)
    stacked = {lr for lr, ndim in Counted.calls if ndim > 1}
    assert stacked == {0.1}  # round 0 trained, round 1 did not
    assert len(run_batched(algo, prob, sched, 2, batch_size=8, evaluate=False, fast=False).history) == 2
# ----------------------------------------------------------------------------- mutants of daa3d34
@pytest.mark.parametrize("window_rows", [None, 1, 4])
@pytest.mark.parametrize("solver", ["sgd", "momentum"])
def test_every_step_with_one_client_left_runs_on_the_single_client_path(prob, monkeypatch, window_rows, solver):
    """Step counts 9, 2, 5: steps 5-8 of each round have one client left, and numpy runs all four on the
    single-client path (plain SGD: in _packed_sgd_steps_numpy_one's loop, batches of 4 steps in all per round;
    momentum: one _packed_grad_numpy_one call per step) whatever the windows: one for the round; the fewest rows
    (GATHER_BYTES 1: 3 rows, one per client, so steps 4-5 share a window and steps 6-8 make one); 4 rows (steps 4-6,
    then 7-8, a window that starts with one client left). The parameters are the bits of fast=False, which runs
    every step on the stacked kernel. Mutants PF21 (the first single-client step found by bisect_right: only a
    window's last step), PF23 (one step late) and PF25 (searched from k0 + 1) of daa3d34 ran those steps on the
    stacked kernel: the same bits, the critical path's speedup lost."""
    steps = []
    if solver == "sgd":
        loop = batched._sgd_steps_one

        def spy(th, X, *rest):
            steps.append(X.shape[0])
            return loop(th, X, *rest)

        monkeypatch.setattr(batched, "_sgd_steps_one", spy)
    else:
        grad = batched._grad_one

        def spy(*args):
            steps.append(1)
            return grad(*args)

        monkeypatch.setattr(batched, "_grad_one", spy)
    if window_rows is not None:  # GATHER_BYTES // (B (D + C + 1) 8) rows, at least one per client
        D, C = prob.model.num_features + 1, prob.model.num_classes
        monkeypatch.setattr(batched, "GATHER_BYTES", 1 if window_rows == 1 else window_rows * B * (D + C + 1) * 8)
    algo = make_algorithm("fedavg", sgd(0.05) if solver == "sgd" else momentum_sgd(0.05, 0.9))
    fast = run_batched(algo, prob, FixedSteps([9, 2, 5]), 2, batch_size=B, seed=1)
    assert sum(steps) == 2 * 4
    generic = run_batched(algo, prob, FixedSteps([9, 2, 5]), 2, batch_size=B, seed=1, fast=False)
    for k in ("W", "b"):
        assert fast.params[k].tobytes() == generic.params[k].tobytes()


def test_the_step_sizes_kept_for_later_rounds_are_read_only(prob):
    """numpy's step sizes, computed once per learning rate and kept in the run's cache for every later round, are
    read-only 0-d float64 arrays with the bits of solver.step_size(k): a multiply into one (``lr *= ...``) raises
    instead of changing the step of every later round. Mutant PF20 of daa3d34 (writeable step sizes)."""
    solver = decayed_sgd(0.1, gamma=0.8)
    be = batched._make_backend("numpy", None)
    D, C = prob.model.num_features + 1, prob.model.num_classes
    Xall = np.concatenate([prob.train_x, np.ones((prob.train_x.shape[0], 1))], axis=1)
    cache = {}
    batched._local_phase(be, solver, np.zeros((D, C)), None, np.array([2, 0]), np.array([3, 2]), prob.num_samples,
                         prob.offsets, Xall, None, B, D, C, prob.l2, 0, 0, True, cache,
                         prob.train_y.astype(np.int64))
    sizes, _, kept = cache[solver.lr]
    assert len(kept) == 3 and sizes == [solver.step_size(k) for k in range(3)] == [0.1, 0.1 * 0.8, 0.1 * 0.8 ** 2]
    for k, lr in enumerate(kept):
        assert lr.shape == () and lr.dtype == np.float64 and lr.tobytes() == np.float64(sizes[k]).tobytes()
        with pytest.raises(ValueError, match="read-only"):
            lr *= 2.0

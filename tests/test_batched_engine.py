"""The batched engine against the per-client loop (run_sequential), the torch backend
against numpy, mini-batching, divergence, lr_at's values (fedlib.engines.batched)."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.engines import batched
from fedlib.engines.batched import (DivergenceError, EpochBatcher, minibatch_indices, run_batched, run_engine,
                                    run_reference)
from fedlib.problems.logistic import LogisticProblem
from fedlib.rng import generator
from fedlib.schedules import FixedEpochs, FixedSteps, RandomEpochs, step_decay_lr
from fedlib.server import adam, momentum
from fedlib.solvers import decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd

B = 8
SIZES = [30, 45, 61, 17, 80, 52]


@pytest.fixture(scope="module")
def prob():
    return LogisticProblem(synthetic(num_clients=6, seed=1, num_samples=SIZES), l2=0.001)


def _assert_same(r1, r2, tol=1e-10, round_params=None, prob=None):
    """The two runs' records and final parameters agree. Test accuracies are equal; with ``round_params`` (each
    run's parameters after every round) and ``prob``, two accuracies may differ only by test samples whose top
    logits tie (``_assert_same_predictions``)."""
    assert len(r1.history) == len(r2.history)
    for t, (h1, h2) in enumerate(zip(r1.history, r2.history)):
        assert h1["clients"] == h2["clients"] and h1["local_steps"] == h2["local_steps"]
        assert h1["train_loss"] == pytest.approx(h2["train_loss"], abs=tol, rel=0)
        assert h1["tau_eff"] == pytest.approx(h2["tau_eff"], rel=1e-12)
        assert h1["chi2"] == pytest.approx(h2["chi2"], rel=1e-9, abs=1e-14)
        np.testing.assert_allclose(h1["a_norms"], h2["a_norms"], rtol=1e-12)
        if h1["test_accuracy"] is not None:
            if round_params is None:
                assert h1["test_accuracy"] == h2["test_accuracy"]
            else:
                _assert_same_predictions(prob, h1, h2, round_params[0][t], round_params[1][t], tol)
    for k in ("W", "b"):
        np.testing.assert_allclose(r1.params[k], r2.params[k], atol=tol, rtol=0)


def _params_by_round(run, full, algo, prob, sched, kw):
    """The parameters after each round of ``full`` (a run of ``run``): a run of t rounds is the first t rounds of
    the longer one (its records are the first t, bit for bit)."""
    out = []
    for t in range(1, len(full.history)):
        part = run(algo, prob, sched, t, **kw)
        assert [h["train_loss"] for h in part.history] == [h["train_loss"] for h in full.history[:t]]
        out.append(part.params)
    return out + [full.params]


def _assert_same_predictions(prob, h1, h2, p1, p2, tol):
    """Each record's test accuracy is its parameters' (``p1``, ``p2``), the parameters agree to ``tol``, and the
    argmax predictions agree on every test sample but those whose top logits tie to ``tol`` in both runs. Classes
    that no sampled client holds keep equal columns of W, so their logits tie exactly in exact arithmetic; which
    of them argmax returns then rests on the last bit, which the BLAS kernels of a numpy release decide (numpy
    1.24's differ from 2.x's here): such a sample's prediction is no number the engines compute to ``tol``."""
    for k in ("W", "b"):
        np.testing.assert_allclose(p1[k], p2[k], atol=tol, rtol=0)
    x, y = prob.test_x, prob.test_y
    assert h1["test_accuracy"] == prob.test_accuracy(p1) and h2["test_accuracy"] == prob.test_accuracy(p2)
    z1, z2 = prob.model.logits(p1, x), prob.model.logits(p2, x)
    pred1, pred2 = np.argmax(z1, axis=1), np.argmax(z2, axis=1)
    for i in np.flatnonzero(pred1 != pred2):
        for z in (z1[i], z2[i]):
            assert z.max() - z[pred1[i]] <= tol and z.max() - z[pred2[i]] <= tol, (i, z1[i], z2[i])
    # the records' accuracies differ by the tied samples' predictions alone
    diff = np.sum((pred1 == y).astype(int) - (pred2 == y).astype(int))
    assert (h1["test_accuracy"] - h2["test_accuracy"]) * y.size == pytest.approx(diff, abs=1e-9)


CASES = [
    ("fedavg", lambda: sgd(0.05), None, "full", None),
    ("fednova", lambda: sgd(0.05), None, "with-replacement", 4),
    ("fedprox", lambda: proximal_sgd(0.05, 0.5), None, "uniform", 3),
    ("scaffold", lambda: sgd(0.05), None, "full", None),
    ("vrlsgd", lambda: sgd(0.05, weight_decay=1e-3), None, "uniform", 4),
    ("fednova-vr", lambda: momentum_sgd(0.02, 0.9), None, "with-replacement", 5),
    ("fednova-vr", lambda: momentum_proximal_sgd(0.02, 0.8, 0.3, weight_decay=1e-3), "momentum", "full", None),
    ("fednova", lambda: momentum_sgd(0.02, 0.9), "adam", "uniform", 5),
    ("fedavg", lambda: decayed_sgd(0.05, gamma=0.97), None, "full", None),
]


@pytest.mark.parametrize("name,solver,server,sampling,q", CASES)
def test_batched_equals_per_client_loop(prob, name, solver, server, sampling, q):
    """Same batches, same sampling, same random epochs: same numbers to 1e-10 (float64)."""
    algo = make_algorithm(name, solver(), {"momentum": momentum(0.5), "adam": adam(0.01), None: None}[server])
    sched = RandomEpochs(prob.num_samples, B, 1, 3, seed=7)
    kw = dict(batch_size=B, seed=3, sampling=sampling, clients_per_round=q,
              lr_at=lambda t: step_decay_lr(algo.solver.lr, t, 4))
    fast = run_batched(algo, prob, sched, 4, **kw)
    loop = run_reference(algo, prob, sched, 4, **kw)
    round_params = [_params_by_round(run, full, algo, prob, sched, kw)
                    for run, full in ((run_batched, fast), (run_reference, loop))]
    _assert_same(fast, loop, round_params=round_params, prob=prob)
    assert [h["lr"] for h in fast.history] == [h["lr"] for h in loop.history]


def test_generic_solver_path_is_bitwise_the_fast_path(prob):
    """fast=False runs LocalSolver.update on the stacked arrays: identical bits."""
    algo = make_algorithm("fednova-vr", momentum_proximal_sgd(0.02, 0.9, 0.3, weight_decay=1e-3))
    sched = RandomEpochs(prob.num_samples, B, 1, 3, seed=1)
    r1 = run_batched(algo, prob, sched, 3, batch_size=B, seed=2)
    r2 = run_batched(algo, prob, sched, 3, batch_size=B, seed=2, fast=False)
    for k in ("W", "b"):
        assert np.array_equal(r1.params[k], r2.params[k])


def test_small_gather_windows_give_the_same_numbers(prob, monkeypatch):
    algo = make_algorithm("fednova", momentum_sgd(0.02, 0.9))
    sched = RandomEpochs(prob.num_samples, B, 1, 3, seed=1)
    r1 = run_batched(algo, prob, sched, 2, batch_size=B)
    monkeypatch.setattr(batched, "GATHER_BYTES", 1)  # one window per step
    r2 = run_batched(algo, prob, sched, 2, batch_size=B)
    for k in ("W", "b"):
        assert np.array_equal(r1.params[k], r2.params[k])


@pytest.mark.parametrize("name,solver,server,sampling,q", [CASES[0], CASES[5], CASES[6]])
def test_torch_backend_equals_numpy(prob, name, solver, server, sampling, q):
    pytest.importorskip("torch")
    algo = make_algorithm(name, solver(), {"momentum": momentum(0.5), None: None}[server])
    sched = RandomEpochs(prob.num_samples, B, 1, 3, seed=7)
    kw = dict(batch_size=B, seed=3, sampling=sampling, clients_per_round=q)
    r_np = run_batched(algo, prob, sched, 3, **kw)
    r_t = run_batched(algo, prob, sched, 3, backend="torch", device="cpu", **kw)
    _assert_same(r_np, r_t)


def test_history_records(prob):
    algo = make_algorithm("fedavg", sgd(0.05))
    sched = FixedEpochs(prob.num_samples, B, 2)
    seen = []
    run = run_batched(algo, prob, sched, 3, batch_size=B, callback=seen.append)
    assert len(run.history) == 3 and seen == run.history
    h = run.history[0]
    for key in ("round", "lr", "train_loss", "test_accuracy", "tau_eff", "chi2", "clients", "local_steps", "a_norms",
                "weights", "time_s"):
        assert key in h
    assert [r["round"] for r in run.history] == [0, 1, 2]
    # E = 2 epochs of ceil(n_i / B) steps; FedAvg with SGD: ||a_i|| = tau_i, tau_eff = sum p_i tau_i
    tau = 2 * -(-prob.num_samples // B)  # training sizes (90% of SIZES)
    assert h["local_steps"] == tau.tolist() and h["clients"] == list(range(6))
    assert h["tau_eff"] == pytest.approx(float(prob.p @ tau))
    assert run.initial["train_loss"] == pytest.approx(np.log(10))
    assert run.history[-1]["train_loss"] < run.initial["train_loss"]
    # equal epochs, different n_i: FedAvg's weights differ from p, so chi2 > 0
    assert h["chi2"] > 0


def test_fednova_with_equal_steps_is_fedavg(prob):
    sched = FixedSteps([5] * 6)
    r1 = run_batched(make_algorithm("fedavg", sgd(0.05)), prob, sched, 3, batch_size=B)
    r2 = run_batched(make_algorithm("fednova", sgd(0.05)), prob, sched, 3, batch_size=B)
    for k in ("W", "b"):
        np.testing.assert_allclose(r1.params[k], r2.params[k], atol=1e-13)
    assert r1.history[0]["chi2"] == pytest.approx(0.0, abs=1e-15)


def test_run_engine_dispatch(prob):
    algo = make_algorithm("fedavg", sgd(0.05))
    sched = FixedEpochs(prob.num_samples, B, 1)
    a = run_engine("batched", algo, prob, sched, 1, batch_size=B)
    b = run_engine("reference", algo, prob, sched, 1, batch_size=B)
    _assert_same(a, b)
    with pytest.raises(ValueError, match="engine"):
        run_engine("gpu", algo, prob, sched, 1, batch_size=B)


# ----------------------------------------------------------------------------- batches
def test_minibatch_indices_epochs_are_permutations_and_last_batch_partial():
    n, b = 23, 5
    idx, counts = minibatch_indices(n, b, 12, generator(0, "batches", 0, 0))
    assert idx.shape == (12, 5) and counts.tolist() == [5, 5, 5, 5, 3] * 2 + [5, 5]
    for e in range(2):
        rows = idx[5 * e:5 * e + 5]
        real = np.concatenate([r[:c] for r, c in zip(rows, counts[5 * e:5 * e + 5])])
        assert sorted(real.tolist()) == list(range(n))
    assert not np.array_equal(idx[:4], idx[5:9])  # a fresh permutation each epoch


@pytest.mark.parametrize("rng", [0, None, "batches"])
def test_minibatch_indices_names_an_rng_that_is_no_generator(rng):
    """Before: a seed, None or a string in place of the generator was Python's AttributeError ("'int' object has no
    attribute 'permutation'"), naming no argument (and with steps=0 it was taken without a word)."""
    for steps in (4, 0):
        with pytest.raises(ValueError, match=r"^rng must be a numpy random Generator \(e\.g\. fedlib\.rng\.generator\("
                                             rf"seed, 'batches', round, client\)\), got {type(rng).__name__}$"):
            minibatch_indices(5, 2, steps, rng)
    legacy, seeded = minibatch_indices(5, 2, 4, np.random.RandomState(0)), minibatch_indices(5, 2, 4, generator(0, "batches"))
    assert legacy[0].shape == seeded[0].shape == (4, 2)  # anything with permutation(n) still draws the batches


def test_epoch_batcher_matches_minibatch_indices():
    sizes = [23, 7]
    eb = EpochBatcher(sizes, 5, seed=4)
    for client, n in enumerate(sizes):
        idx, counts = minibatch_indices(n, 5, 11, generator(4, "batches", 2, client))
        for k in range(11):
            assert eb.batch(2, client, k).tolist() == idx[k, :counts[k]].tolist()



@pytest.mark.parametrize("client, step, message", [
    (0, -1, "step must be an integer >= 0, got -1"),
    (0, 1.5, "step must be an integer >= 0, got 1.5"),
    (0, True, "step must be an integer >= 0, got True"),
    (0, "1", "step must be an integer >= 0, got '1'"),
    (2, 0, "client must be an integer in [0, 2), got 2"),
    (-1, 0, "client must be an integer in [0, 2), got -1"),
    (1.0, 0, "client must be an integer in [0, 2), got 1.0"),
    (True, 0, "client must be an integer in [0, 2), got True"),
])
def test_epoch_batcher_batch_names_a_step_or_client_outside_its_range(client, step, message):
    """Before: step -1 after the first epoch was drawn returned that epoch's last batch without a word (an IndexError
    before), 1.5 was a TypeError ('list indices must be integers or slices, not float'), True was step 1; client 2 of
    2 was numpy's IndexError, -1 and True the generator's 'key must be an integer >= 0'. The check costs well under a
    microsecond a call (a plain int takes no isinstance chain)."""
    batcher = EpochBatcher([5, 3], 2, seed=7)
    first = batcher.batch(0, 0, 0)
    with pytest.raises(ValueError) as caught:
        batcher.batch(0, client, step)
    assert str(caught.value) == message
    assert batcher.batch(0, 0, 0).tolist() == first.tolist()
    assert batcher.batch(0, np.int64(1), np.int64(2)).tolist() == batcher.batch(0, 1, 2).tolist()

# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("engine", ["batched", "reference"])
def test_divergence_names_the_round(prob, engine):
    algo = make_algorithm("fedavg", sgd(1e6))
    sched = FixedEpochs(prob.num_samples, B, 2)
    with pytest.raises(DivergenceError, match=r"diverged in round \d+") as info:
        with np.errstate(all="ignore"):
            run_engine(engine, algo, prob, sched, 50, batch_size=B)
    assert isinstance(info.value, FloatingPointError) and 0 <= info.value.round < 50


def test_bad_arguments(prob):
    algo = make_algorithm("fedavg", sgd(0.05))
    with pytest.raises(ValueError, match="batch_size"):
        run_batched(algo, prob, FixedEpochs(prob.num_samples, 10, 1), 1, batch_size=B)
    with pytest.raises(ValueError, match="clients_per_round"):
        run_batched(algo, prob, FixedEpochs(prob.num_samples, B, 1), 1, batch_size=B, sampling="uniform",
                    clients_per_round=7)
    with pytest.raises(ValueError, match="clients_per_round"):
        run_batched(algo, prob, FixedEpochs(prob.num_samples, B, 1), 1, batch_size=B, sampling="with-replacement")
    with pytest.raises(ValueError, match="schedule"):
        run_batched(algo, prob, FixedSteps([1, 2]), 1, batch_size=B)
    with pytest.raises(ValueError, match="backend"):
        run_batched(algo, prob, FixedSteps([1] * 6), 1, batch_size=B, backend="jax")
    with pytest.raises(ValueError, match="device"):
        run_batched(algo, prob, FixedSteps([1] * 6), 1, batch_size=B, device="cuda")


@pytest.mark.parametrize("engine", ["batched", "reference"])
@pytest.mark.parametrize("flag, value", [("evaluate", "no"), ("evaluate", 0), ("fast", 2), ("fast", None)])
def test_evaluate_and_fast_must_be_true_or_false(prob, engine, flag, value):
    """Before: any truthy value was True and any falsy one False: evaluate='no' evaluated every round, fast=2 took
    the fused step, without a word. np.bool_ is taken as check_flag takes it, with the same numbers."""
    algo, sched = make_algorithm("fedavg", sgd(0.05)), FixedEpochs(prob.num_samples, B, 1)
    with pytest.raises(ValueError, match=rf"^{flag} must be True or False, got {value!r}$"):
        run_engine(engine, algo, prob, sched, 1, batch_size=B, **{flag: value})
    plain = run_engine(engine, algo, prob, sched, 1, batch_size=B, evaluate=False, fast=True)
    numpy = run_engine(engine, algo, prob, sched, 1, batch_size=B, evaluate=np.False_, fast=np.True_)
    assert np.array_equal(plain.params["W"], numpy.params["W"]) and plain.history[0].keys() == numpy.history[0].keys()

def test_docstring_examples():
    import doctest

    from fedlib.engines import batched as mod_batched
    from fedlib.experiments import synthetic as mod_synthetic
    from fedlib.problems import logistic as mod_logistic

    for mod in (mod_batched, mod_logistic, mod_synthetic):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0, f"{mod.__name__}: {res.failed} docstring example(s) failed"


def test_lr_sweep_keeps_eta_times_rounds():
    """experiments.synthetic.lr_sweep (chapter 4): rounds scale as 0.02 / lr, each factory gets its lr,
    and the runs at the paper's lr are run_setting's."""
    import dataclasses

    from fedlib.data.synthetic import synthetic
    from fedlib.experiments import synthetic as S
    from fedlib.problems.logistic import LogisticProblem

    prob = LogisticProblem(synthetic(1, 1, num_clients=5, dim=6, seed=0))
    setting = dataclasses.replace(S.SETTINGS[0], name="tiny")
    seen = []

    def fedavg(problem, st, lr):
        seen.append(lr)
        return S.fedavg_sgd(problem, st, lr)

    out = S.lr_sweep(prob, setting, {"FedAvg": fedavg}, (0.02, 0.005), (0,), 3)
    assert out[0.02, "FedAvg"].losses.shape == (1, 4) and out[0.005, "FedAvg"].losses.shape == (1, 13)
    assert seen == [0.02, 0.005]
    same = S.run_setting(prob, setting, S.fedavg_sgd, (0,), 3)
    np.testing.assert_array_equal(out[0.02, "FedAvg"].losses, same.losses)
    with pytest.raises(ValueError, match="lrs"):
        S.lr_sweep(prob, setting, {"FedAvg": fedavg}, (0.0,), (0,), 3)


def test_reference_refuses_what_only_the_batched_engine_does(prob):
    """run_reference takes run_batched's arguments, but never drops a checkpoint, a communicator or
    a typo silently."""
    algo = make_algorithm("fednova", sgd(0.05))
    sched = FixedSteps(np.full(prob.num_clients, 2))
    kw = dict(batch_size=B, seed=0, evaluate=False)
    run = run_engine("reference", algo, prob, sched, 1, backend="torch", device="cpu", fast=False, **kw)
    assert len(run.history) == 1
    for extra in (dict(resume={"state": None}), dict(comm=object()), dict(on_round_end=lambda *a: None)):
        with pytest.raises(ValueError, match="run_reference does not support"):
            run_reference(algo, prob, sched, 1, **kw, **extra)
    with pytest.raises(TypeError):
        run_reference(algo, prob, sched, 1, clients_per_rond=2, **kw)
    with pytest.raises(ValueError, match="backend"):
        run_reference(algo, prob, sched, 1, backend="jax", **kw)


def test_a_batch_larger_than_every_client_is_full_batch_without_the_memory(prob):
    """Above the largest n_i every batch is the client's whole data (same draws), so a huge
    batch size gives the numbers of batch = max n_i, and the engine allocates for max n_i only."""
    algo = make_algorithm("fednova", momentum_sgd(0.02, 0.9))
    top = int(max(SIZES))
    runs = [run_batched(algo, prob, FixedSteps([3, 1, 2, 4, 2, 1]), 3, batch_size=b, seed=5) for b in (top, 10**9)]
    _assert_same(runs[0], runs[1], tol=1e-13)
    ref = run_reference(algo, prob, FixedSteps([3, 1, 2, 4, 2, 1]), 3, batch_size=10**9, seed=5)
    _assert_same(runs[1], ref)


class _Steps:
    def __init__(self, value):
        self.value = value

    def local_steps(self, t):
        return self.value


@pytest.mark.parametrize("steps,match", [
    (np.array([3] * 7), r"one step count per client \(6 clients in (the problem|p)\), got shape \(7,\)"),
    (np.array([[3] * 6]), r"got shape \(1, 6\)"),
    (3, r"got shape \(\)"),
    (np.array([3, 2.9, 3, 3, 3, 3]), "must hold whole numbers"),
])
@pytest.mark.parametrize("engine", ["batched", "reference"])
def test_schedule_output_is_checked_by_both_engines(prob, steps, match, engine):
    """run_batched took 7 step counts for 6 clients without a word (a (1, 6) array or a scalar gave a
    bare IndexError), and both engines cut 2.9 steps to 2. Both now check the schedule's output alike
    (fedlib.schedules.round_local_steps)."""
    alg = make_algorithm("fedavg", sgd(0.05))
    with pytest.raises(ValueError, match=match):
        if engine == "batched":
            run_batched(alg, prob, _Steps(steps), 1, batch_size=B)
        else:
            run_engine("reference", alg, prob, _Steps(steps), 1, batch_size=B)


def test_resume_must_continue_this_run(prob):
    """run_batched(resume=...) took any state: a FedAvg state under SCAFFOLD ran SCAFFOLD as FedAvg
    (no variates), a SCAFFOLD state under FedAvg kept applying its variates, a 2-round history with
    rounds=1 came back as 2 rounds, and run_reference's {'W', 'b'} state gave a TypeError."""
    sched = FixedEpochs(prob.num_samples, B, 1)
    fedavg, scaffold = make_algorithm("fedavg", sgd(0.05)), make_algorithm("scaffold", sgd(0.05))
    ra = run_batched(fedavg, prob, sched, 2, batch_size=B)
    rs = run_batched(scaffold, prob, sched, 2, batch_size=B)

    def resume(run, **changes):
        doc = {"state": run.state, "history": run.history, "initial": run.initial}
        doc.update(changes)
        return doc

    with pytest.raises(ValueError, match=r"'scaffold' needs control variates, but the saved state has none"):
        run_batched(scaffold, prob, sched, 4, batch_size=B, resume=resume(ra))
    with pytest.raises(ValueError, match=r"'fedavg' needs no control variates, but the saved state has them"):
        run_batched(fedavg, prob, sched, 4, batch_size=B, resume=resume(rs))
    with pytest.raises(ValueError, match=r"2 rounds done, more than rounds = 1"):
        run_batched(fedavg, prob, sched, 1, batch_size=B, resume=resume(ra))
    with pytest.raises(ValueError, match=r"after round 2 but the history has 1 round\b"):
        run_batched(fedavg, prob, sched, 4, batch_size=B, resume=resume(ra, history=ra.history[:1]))
    ref = run_engine("reference", fedavg, prob, sched, 2, batch_size=B)
    with pytest.raises(ValueError, match=r"packed array of shape .* got dict .*pack_params"):
        run_batched(fedavg, prob, sched, 4, batch_size=B, resume=resume(ra, state=ref.state))
    with pytest.raises(ValueError, match="resume must be a dict"):
        run_batched(fedavg, prob, sched, 4, batch_size=B, resume=ra.state)
    # the run's own checkpoint resumes to the straight run
    _assert_same(run_batched(fedavg, prob, sched, 4, batch_size=B, resume=resume(ra)),
                 run_batched(fedavg, prob, sched, 4, batch_size=B))


# --------------------------------------------------------------------------- lr_at
def test_run_batched_names_lr_at_when_it_returns_no_learning_rate():
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    problem = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    with pytest.raises(ValueError, match=r"^lr_at\(1\) must return the round's client learning rate, a finite number "
                                         r"> 0, got -0\.1"):
        run_batched(make_algorithm("fednova", sgd(0.1)), problem, FixedSteps([1, 2]), 2, batch_size=5,
                    lr_at=lambda t: 0.1 if t == 0 else -0.1)
    run = run_batched(make_algorithm("fednova", sgd(0.1)), problem, FixedSteps([1, 2]), 2, batch_size=5,
                      lr_at=lambda t: 0.05)
    assert [h["lr"] for h in run.history] == [0.05, 0.05]


def test_both_engines_call_the_callback_as_each_round_ends_with_the_same_records(prob):
    """run_reference called callback with all the records after the last round (its docstring said so, though it
    promised run_batched's "arguments and records"); now, as run_batched, with each round's record as the round
    ends: when callback sees round t, lr_at has been asked for no later round than t (before: 2 for every round of
    a 3-round run). Both engines give the same records, in the same order (time_s aside, numbers to 1e-10)."""
    algo = make_algorithm("scaffold", sgd(0.05))
    sched = RandomEpochs(prob.num_samples, B, 1, 2, seed=5)
    calls = {}
    for run in (run_batched, run_reference):
        asked, seen = [], []

        def lr_at(t, asked=asked):
            asked.append(t)
            return 0.05 / (1 + t)

        def callback(rec, asked=asked, seen=seen):
            seen.append((max(asked), rec))

        out = run(algo, prob, sched, 3, batch_size=B, seed=2, sampling="uniform", clients_per_round=3, lr_at=lr_at,
                  callback=callback)
        assert [(latest, rec["round"]) for latest, rec in seen] == [(0, 0), (1, 1), (2, 2)], run.__name__
        assert [rec for _, rec in seen] == out.history
        calls[run.__name__] = [rec for _, rec in seen]
    for got, want in zip(calls["run_reference"], calls["run_batched"]):
        assert set(got) == set(want)
        for key in set(want) - {"time_s"}:
            if isinstance(want[key], (int, list)) and key != "a_norms" and key != "weights":
                assert got[key] == want[key], key
            else:
                np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=0, err_msg=key)


def test_run_batched_and_run_reference_refuse_a_hook_of_the_wrong_signature():
    """lr_at, callback and on_round_end that cannot take the arguments they are called with are refused before the
    first round, naming the hook and its call. Before: Python's "<lambda>() takes 0 positional arguments but 1 was
    given" from round 0 (callback: after training it; run_reference: after the whole run)."""
    problem = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    algo = make_algorithm("fednova", sgd(0.1))
    for run in (run_batched, run_reference):
        with pytest.raises(ValueError, match=r"^lr_at must be a callable round -> client lr, taking 1 positional "
                                             r"argument: lr_at\(round, client\) does not"):
            run(algo, problem, FixedSteps([1, 2]), 2, batch_size=5, lr_at=lambda round, client: 0.05)
        with pytest.raises(ValueError, match=r"^callback must be a callable record -> None, taking 1 positional "
                                             r"argument: callback\(\) does not \(too many positional arguments\)"):
            run(algo, problem, FixedSteps([1, 2]), 2, batch_size=5, callback=lambda: None)
    with pytest.raises(ValueError, match=r"^on_round_end must be a callable \(state, history, initial\) -> None, "
                                         r"taking 3 positional arguments: on_round_end\(state\) does not"):
        run_batched(algo, problem, FixedSteps([1, 2]), 2, batch_size=5, on_round_end=lambda state: None)


def test_run_batched_and_run_reference_refuse_a_hook_that_is_not_callable():
    """lr_at, callback and on_round_end are checked before the first round. Before: run_batched(..., lr_at=0.05)
    raised Python's TypeError "'float' object is not callable" from round 0, callback=5 the same after training
    round 0 (run_reference: after the whole run), and with rounds=0 nothing was said at all."""
    problem = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    algo = make_algorithm("fednova", sgd(0.1))
    for rounds in (0, 2):
        with pytest.raises(ValueError, match=r"^lr_at must be a callable round -> client lr, got float \(a constant "
                                             r"rate: lr_at=None uses the solver's lr\)"):
            run_batched(algo, problem, FixedSteps([1, 2]), rounds, batch_size=5, lr_at=0.05)
        with pytest.raises(ValueError, match=r"^lr_at must be a callable round -> client lr, got float"):
            run_reference(algo, problem, FixedSteps([1, 2]), rounds, batch_size=5, lr_at=0.05)
        with pytest.raises(ValueError, match=r"^callback must be a callable record -> None, got int"):
            run_batched(algo, problem, FixedSteps([1, 2]), rounds, batch_size=5, callback=5)
        with pytest.raises(ValueError, match=r"^callback must be a callable record -> None, got list"):
            run_reference(algo, problem, FixedSteps([1, 2]), rounds, batch_size=5, callback=[])
        with pytest.raises(ValueError, match=r"^on_round_end must be a callable \(state, history, initial\) -> None, "
                                             r"got str"):
            run_batched(algo, problem, FixedSteps([1, 2]), rounds, batch_size=5, on_round_end="save")
    seen = []
    run_batched(algo, problem, FixedSteps([1, 2]), 2, batch_size=5, lr_at=lambda t: 0.05, callback=seen.append,
                on_round_end=lambda *args: seen.append(len(args)))
    assert [r["round"] if isinstance(r, dict) else r for r in seen] == [0, 3, 1, 3]


def test_epoch_batcher_checks_num_samples():
    """Before: np.asarray(num_samples, dtype=np.int64) cut [5.7, 3] to [5, 3] without a word, and a client of 0
    (or -1) samples raised ZeroDivisionError ('integer division or modulo by zero') at its first batch, a number
    IndexError ('too many indices for array')."""
    for bad, match in (([5.7, 3], r"num_samples must hold whole numbers"), ([5, 0], r"num_samples must be >= 1 for every "
                                                                                r"client \(client 1 has 0\)"),
                       (5, r"num_samples must be a non-empty 1-d array of whole numbers, got shape \(\)")):
        with pytest.raises(ValueError, match=rf"^{match}"):
            EpochBatcher(bad, 2, 0)
    batcher = EpochBatcher([5.0, 3.0], 2, 7)
    assert batcher.num_samples.dtype == np.int64
    np.testing.assert_array_equal(batcher.batch(0, 1, 2), EpochBatcher([5, 3], 2, 7).batch(0, 1, 2))


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 1.5, -2, True, None])
def test_divergence_error_refuses_a_round_that_is_no_integer(bad):
    """Was int(round_index): inf -> OverflowError 'cannot convert float infinity to integer', nan -> 'cannot convert
    float NaN to integer', 1.5 -> 'diverged in round 1' (another round), True -> round 1, -2 accepted. -1 (the
    starting point's loss) stays a round."""
    with pytest.raises(ValueError, match=r"^round_index must be an integer >= -1, got "):
        DivergenceError(bad, "x")
    assert DivergenceError(np.int64(2), "x").round == 2 and DivergenceError(-1, "x").round == -1


def test_minibatch_indices_steps_is_a_whole_number():
    """steps is a step count, a whole number as the schedules' local_steps arrays (the fedlib docstring's
    convention): 4.0 is 4. Before: "steps must be an integer >= 0, got 4.0". The batches are the same, bit for bit;
    1.5, True and NaN are still refused."""
    got, want = (minibatch_indices(5, 2, n, generator(0, "batches", 0, 1)) for n in (4.0, 4))
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=r"^steps must be a whole number >= 0, got "):
            minibatch_indices(5, 2, bad, generator(0, "batches", 0, 1))

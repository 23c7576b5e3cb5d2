"""``fedlib.bench``: the three engines of ``bench synthetic`` (batched, simulator-style
torch loop, lean numpy loop) run the same training and agree to 1e-10; ``bench synthetic`` and
``bench cifar10`` refuse a bad round, repeat or step count before timing anything. No timing is
asserted."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.bench import bench_synthetic, format_bench, run_simulator
from fedlib.data import synthetic
from fedlib.engines.batched import run_batched
from fedlib.experiments import cifar10 as C
from fedlib.problems.logistic import LogisticProblem
from fedlib.schedules import make_epoch_schedule
from fedlib.solvers import momentum_sgd, sgd

pytest.importorskip("torch")

KEYS = ("batched_round_s", "reference_round_s", "simulator_round_s", "speedup_wall", "speedup_cpu",
        "speedup_vs_simulator_wall", "speedup_vs_simulator_cpu", "batched_round_cpu_s", "reference_round_cpu_s",
        "simulator_round_cpu_s", "client_steps_per_round", "max_local_steps", "critical_path_bound",
        "reference_us_per_client_step", "simulator_us_per_client_step", "batched_us_per_batched_step",
        "max_abs_param_diff", "max_abs_param_diff_reference", "max_abs_param_diff_simulator", "raw")


@pytest.mark.parametrize("algorithm,epochs", [("fednova", "1-3"), ("fedavg", "2")])
def test_tiny_bench_three_engines_agree(algorithm, epochs):
    out = bench_synthetic(rounds=1, repeat=1, num_clients=4, epochs=epochs, algorithm=algorithm)
    r = out["results"]
    assert set(KEYS) <= set(r)
    assert r["max_abs_param_diff"] <= 1e-10
    assert r["max_abs_param_diff_simulator"] <= 1e-10 and r["max_abs_param_diff_reference"] <= 1e-10
    assert set(r["raw"]) == {"batched", "simulator", "reference"}
    for name in ("batched", "simulator", "reference"):
        assert len(r["raw"][name]["wall"]) == 1 and r[f"{name}_round_s"] > 0
    assert r["speedup_wall"] > 0 and r["speedup_vs_simulator_wall"] > 0
    assert r["critical_path_bound"] == pytest.approx(r["client_steps_per_round"] / r["max_local_steps"])
    assert 1.0 <= r["critical_path_bound"] <= 4.0
    text = format_bench(r)
    assert "simulator" in text and "lean numpy loop" in text and "critical path" in text
    assert out["config"]["torch_threads"] >= 1 and len(out["config"]["engines"]) == 3


def test_bench_without_simulator_for_vr_algorithms():
    """The simulator-style loop is FedAvg/FedNova only: skipped (None) for VR algorithms."""
    r = bench_synthetic(rounds=1, repeat=1, num_clients=3, algorithm="scaffold")["results"]
    assert r["simulator_round_s"] is None and r["speedup_vs_simulator_wall"] is None
    assert r["max_abs_param_diff"] <= 1e-10 and "simulator" not in r["raw"]
    assert "simulator" not in format_bench(r)


def test_run_simulator_matches_batched_over_rounds_with_l2():
    prob = LogisticProblem(synthetic(num_clients=3, seed=2, num_samples=[30, 55, 41]), l2=0.01)
    sched = make_epoch_schedule(prob.num_samples, 10, (1, 3), seed=5)
    algo = make_algorithm("fednova", sgd(0.05))
    ref = run_batched(algo, prob, sched, 3, batch_size=10, seed=5, evaluate=True)
    sim = run_simulator(algo, prob, sched, 3, batch_size=10, seed=5, evaluate=True)
    for k in ("W", "b"):
        np.testing.assert_allclose(sim["params"][k], ref.params[k], rtol=0, atol=1e-10)
    assert len(sim["metrics"]) == 3
    assert sim["metrics"][-1]["train_loss"] == pytest.approx(ref.history[-1]["train_loss"], abs=1e-10)


def test_run_simulator_refuses_what_it_does_not_run():
    prob = LogisticProblem(synthetic(num_clients=2, seed=0, num_samples=[20, 30]))
    sched = make_epoch_schedule(prob.num_samples, 10, (1, 1), seed=0)
    with pytest.raises(ValueError, match="plain local SGD"):
        run_simulator(make_algorithm("fednova", momentum_sgd(0.1, 0.5)), prob, sched, 1, batch_size=10)
    with pytest.raises(ValueError, match="FedAvg and FedNova"):
        run_simulator(make_algorithm("scaffold", sgd(0.1)), prob, sched, 1, batch_size=10)


@pytest.mark.parametrize("value", ["no", 1, None])
def test_run_simulator_evaluate_must_be_true_or_false(value):
    """Before: evaluate='no' or 1 (truthy) recorded the metrics of every round and None none, without a word (as
    run_batched did). np.bool_ is taken (check_flag), with the same numbers."""
    prob = LogisticProblem(synthetic(num_clients=2, seed=0, num_samples=[20, 30]))
    sched, algo = make_epoch_schedule(prob.num_samples, 10, (1, 1), seed=0), make_algorithm("fedavg", sgd(0.1))
    with pytest.raises(ValueError, match=rf"^evaluate must be True or False, got {value!r}$"):
        run_simulator(algo, prob, sched, 1, batch_size=10, evaluate=value)
    plain, numpy = (run_simulator(algo, prob, sched, 1, batch_size=10, evaluate=flag) for flag in (True, np.True_))
    assert np.array_equal(plain["params"]["W"], numpy["params"]["W"]) and plain["metrics"] == numpy["metrics"]

def test_engines_check_is_relative_to_the_parameters():
    """At lr 1e6 the parameters are ~1e6 and summing in another order moves them by ~1e-10 (7.3e-10 measured):
    the engines agree to ~1e-16 relative, which the old absolute 1e-10 check called a disagreement."""
    r = bench_synthetic(rounds=2, repeat=1, num_clients=4, epochs="1", lr=1e6)["results"]
    assert r["max_abs_param_diff"] > 1e-10        # what the absolute check refused
    assert r["max_abs_param_diff"] <= 1e-14 * 1e6


@pytest.fixture(scope="module")
def sample():
    return C.load_data(sample=True)


@pytest.mark.parametrize("bad, match", [
    (dict(steps=0), "steps"), (dict(steps=-3), "steps"), (dict(steps=2.5), "steps"), (dict(steps=True), "steps"),
    (dict(epochs=0), "epochs"), (dict(path="foo"), "path"), (dict(cuda_graph=True), "cuda_graph"),
])
def test_bench_cifar10_refuses_a_bad_round_before_timing_anything(sample, bad, match):
    """steps <= 0, a float or a bool timed a round of one step per client (or a fractionally
    scaled one) without a word; epochs 0, an unknown path and CUDA graphs on a CPU were refused
    by the engine only after the sequential loop's rounds had been timed."""
    said = []
    kw = dict(width=0.03, steps=1, repeat=1, device="cpu", progress=said.append)
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        C.bench_cifar10(sample, **kw)
    assert said == []  # nothing was timed


@pytest.mark.parametrize("bad", [dict(repeat=True), dict(repeat=2.5), dict(rounds=2.5), dict(rounds=0)])
def test_bench_synthetic_takes_whole_numbers_of_rounds_and_repeats(bad):
    """repeat=True ran one repetition and recorded "repeat": true; repeat=2.5 failed with a
    TypeError from range()."""
    from fedlib.bench import bench_synthetic

    kw = dict(rounds=1, repeat=1, num_clients=3)
    kw.update(bad)
    with pytest.raises(ValueError, match="rounds|repeat"):
        bench_synthetic(**kw)


@pytest.mark.parametrize("name", ["equal_sizes", "evaluate"])
@pytest.mark.parametrize("value", ["no", "False", 1, 0, None])
def test_bench_synthetic_flags_must_be_true_or_false(name, value):
    """Any truthy value ran the flag's way and recorded True: equal_sizes='no' measured equal-sized clients
    (24.0 client steps per round for 22.0 on 3 clients); 0 and None were taken as False."""
    with pytest.raises(ValueError, match=f"{name} must be True or False"):
        bench_synthetic(rounds=1, repeat=1, num_clients=3, **{name: value})


def test_bench_synthetic_takes_numpy_bools():
    out = bench_synthetic(rounds=1, repeat=1, num_clients=3, equal_sizes=np.bool_(True), evaluate=np.bool_(False))
    assert out["config"]["equal_sizes"] is True and out["config"]["evaluate"] is False
    assert out["results"]["client_steps_per_round"] == 24.0


def test_bench_cifar10_steps_and_epochs_are_whole_numbers(monkeypatch):
    """steps and epochs count local steps and epochs, whole numbers (the fedlib docstring's convention): 2.0 reaches
    the benchmark as the int 2. Before: "steps must be an integer >= 1, got 2.0" (epochs alike), while
    make_epoch_schedule's parse_epochs took 2.0. 1.5 and True are still refused."""
    seen = []
    monkeypatch.setattr(C, "_bench_cifar10", lambda data, **kw: seen.append((kw["steps"], kw["epochs"])))
    C.bench_cifar10(None, steps=3.0, epochs=2.0, device="cpu")
    C.bench_cifar10(None, steps=3, epochs=2, device="cpu")
    assert seen[0] == seen[1] == (3, 2) and all(type(v) is int for v in seen[0])
    for name in ("steps", "epochs"):
        for bad in (1.5, True):
            with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= 1, got "):
                C.bench_cifar10(None, device="cpu", **{name: bad})

"""Mutation-testing pass on ``fedlib.models``, ``fedlib.bench`` and ``fedlib.report``: tests that
pin behaviour the rest of the suite left open (mutants that survived it). Expected values come
from REFERENCE §4 / the module docstrings, plain torch calls or hand arithmetic in the comments,
never from the functions' own output. No test looks at wall time: the timed values come from a
fake clock.

Mutants of models.scaled_width / count_parameters (fedlib/models.py), of the 37-mutant input-check run (described
in tests/README.md, Mutation passes):
  killed here: M5 (the test's docstring says which change).

Review and mutants of f37e303..6eb7195, ``fedlib.report.plus_minus`` / ``transposed_markdown_table`` (pass
described in tests/README.md, Mutation passes):
  review: test_plus_minus_refuses_negative_errors_of_any_number_type, test_plus_minus_keeps_strings_and_formats_tensors;
  killed here: P8, P9, T1, T4, T8.

Mutants of efe3bcd..52ae29d, fedlib/report.py (pass described in tests/README.md, Mutation passes):
  RP1-RP6 report: fmt spec unchecked / floats only / _formats TypeError escapes; plus_minus np.bool_ and
        0-d numbers unchecked / a string error parsed as a number.
  all killed by the suite.

Mutants of 86c5527..90cbd4d (report.py) (pass described in tests/README.md, Mutation passes):
report.py: P1 a string read as a number; P4 ``not isfinite`` -> ``isnan``; P5 / P6 the error / the value not
  checked; P8 ``not number >= 0`` -> ``number < 0`` (a NaN error gets the other message); P9 every refusal naming
  ``value``; TM1 / TM2 the header formatted with the cells' spec: killed by the suite.
  P3 drop ``OverflowError`` (an int beyond float's range raised instead of printing), P7 the error checked before the
  value: killed here. P2 bools no longer skipped in _as_number: equivalent (a bool error is refused before; a bool
  value is 0.0 or 1.0, finite).

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/report.py) (pass described in tests/README.md, Mutation
passes): 10 mutants, one at a time, ``pytest -x`` on test_report_tables.py, this file and
``tests/test_doctests.py -k fedlib.report``: 9 killed by the suite (RP1 0-d object arrays not unwrapped, RP3 a
complex number's real part alone, RP4 every zero error negated, RP5 rows given as a mapping, RP6 a row given as a
mapping, RP7 a row given as a string, RP8 short rows let through, RP9 transposed_markdown_table without _cells,
RP10 a header given as a string), 1 here (RP2 ``.item()`` of a tensor of any dimension), 0 equivalent.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/models.py)
(pass described in tests/README.md, Mutation passes):
  MD1 scaled_width catches ZeroDivisionError, not OverflowError; MD2 count_parameters' trainable_only by bool().
  both killed by the suite.

Mutants of f9b9704..2e0d04d (fedlib/bench.py: bench_synthetic's data_seed) (pass described in tests/README.md,
Mutation passes): E30 data_seed unchecked. killed by the suite: E30.

Mutants of 1112cf7..24d535b (fedlib/bench.py: run_simulator's owner) (pass described in tests/README.md, Mutation
passes):
  BE1 run_simulator's rounds with owner 'p'. killed here: BE1.

Mutants of f929b39..780545c (fedlib/bench.py, 01eeebc: run_simulator's plain-SGD check by the fields) (pass
described in tests/README.md, Mutation passes):
  RS1 the lr_schedule clause dropped; RS2 the builtin_step clause dropped; RS3 ``not solver.builtin_step`` never
  true; RS4 the ``name != "sgd"`` clause dropped; RS5 an lr_schedule refused only with mu. killed by the suite: RS1-RS3,
  RS5. left alive without a test: RS4 (with every field checked, the name clause only refuses plain SGD under another
  label, LocalSolver(0.1, name="plain"), which runs as plain SGD; neither the docstring nor the message names the
  label); the clause was then removed (test_run_simulator_runs_plain_sgd_whatever_its_label).
Mutants of c5aa211..361d535 (fedlib/models.py, 361d535: ``_uninitialised``) (pass described in tests/README.md, Mutation
passes): 7 mutants, one at a time, ``pytest -x -q`` on test_models.py and this file: 3 killed by the suite, 4
equivalent.
  MU1 ``recurse=True``; MU2 ``requires_grad=False``; MU3 no dtype; MU4 built on the CPU, not the meta device; MU5
  ``torch.empty_like(param)`` (a meta tensor); MU6 without ``list()``; MU7 ``torch.zeros``.
  killed by the suite: MU2, MU4, MU5 (test_models.py).
  equivalent: MU1 (Conv2d and Linear have no submodules), MU3 (the meta parameters have the default dtype, which
  torch.empty takes; vgg11 passes none), MU6 (setattr replaces a value of ``_parameters``, no key is added or
  removed while iterating), MU7 (vgg11 draws every value after).
"""
from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fedlib.bench as B
from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.engines.batched import run_batched
from fedlib.models import count_parameters, scaled_width, vgg11
from fedlib.problems.logistic import LogisticProblem
from fedlib.report import fmt, markdown_table, plus_minus, transposed_markdown_table
from fedlib.rng import torch_generator
from fedlib.schedules import FixedSteps, make_epoch_schedule
from fedlib.server import momentum as server_momentum, plain
from fedlib.solvers import LocalSolver, sgd

#: REFERENCE §4: VGG-11 without BatchNorm, conv 3x3 (pad 1) + ReLU, M = 2x2 max-pool.
CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
WIDTH = 0.0625  # 64 -> 4, 128 -> 8, 256 -> 16, 512 -> 32 channels; hidden 512 -> 32


# ----------------------------------------------------------------------------- models
def test_vgg11_forward_is_the_reference_network():
    """The output equals REFERENCE §4's network written with torch.nn.functional on the model's
    own weights: 2x2 pools of stride 2 (a 1x1 'pool' of stride 2 keeps the shapes and survived
    the layout tests), padding 1, ReLU after every conv and hidden linear layer (eval: no dropout)."""
    model = vgg11(width=WIDTH, seed=3).eval()
    convs = [m for m in model if isinstance(m, nn.Conv2d)]
    lins = [m for m in model if isinstance(m, nn.Linear)]
    widths = [4, 8, 16, 16, 32, 32, 32, 32]  # CFG's numbers times 1/16
    assert [tuple(c.weight.shape) for c in convs] == [(w, i, 3, 3) for w, i in zip(widths, [3] + widths[:-1])]
    assert [tuple(m.weight.shape) for m in lins] == [(32, 32), (32, 32), (10, 32)]
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    h, k = x, 0
    for item in CFG:
        if item == "M":
            h = F.max_pool2d(h, kernel_size=2, stride=2)
        else:
            h = F.relu(F.conv2d(h, convs[k].weight, convs[k].bias, padding=1))
            k += 1
    h = h.flatten(1)
    h = F.relu(F.linear(h, lins[0].weight, lins[0].bias))
    h = F.relu(F.linear(h, lins[1].weight, lins[1].bias))
    expected = F.linear(h, lins[2].weight, lins[2].bias)
    with torch.no_grad():
        got = model(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("width", [WIDTH, 0.001])
def test_vgg11_weights_are_the_documented_draws_in_layer_order(width):
    """Module docstring: layers initialised in order from torch_generator(seed, "init"); conv
    weights N(0, sqrt(2 / (9 c_out))) (mean 0: a mean of 1 kept the std test_models looks at),
    conv biases 0; linear weights and biases U(-1/sqrt(f_in), 1/sqrt(f_in)) (kaiming_uniform_ with
    a = sqrt(5): gain sqrt(2 / 6), bound gain * sqrt(3 / f_in) = 1 / sqrt(f_in)). Redrawn here with
    plain Tensor.normal_ / uniform_ from the same generator. Width 0.001 leaves one channel and
    one hidden unit: linear layers with f_in = 1, biases U(-1, 1)."""
    model = vgg11(width=width, seed=7)
    g = torch_generator(7, "init")
    seen = 0
    for layer in model:
        if isinstance(layer, nn.Conv2d):
            std = math.sqrt(2.0 / (3 * 3 * layer.out_channels))
            w = torch.empty(layer.weight.shape).normal_(0.0, std, generator=g)
            torch.testing.assert_close(layer.weight.detach(), w, rtol=1e-6, atol=0)
            assert torch.equal(layer.bias.detach(), torch.zeros(layer.out_channels))
            seen += 1
        elif isinstance(layer, nn.Linear):
            bound = 1.0 / math.sqrt(layer.in_features)
            w = torch.empty(layer.weight.shape).uniform_(-bound, bound, generator=g)
            b = torch.empty(layer.bias.shape).uniform_(-bound, bound, generator=g)
            torch.testing.assert_close(layer.weight.detach(), w, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(layer.bias.detach(), b, rtol=1e-6, atol=1e-7)
            seen += 1
    assert seen == 8 + 3
    # a torch.Generator is drawn from directly (and advanced): the same generator state gives the same weights
    g2 = torch_generator(7, "init")
    before = g2.get_state().clone()
    same = vgg11(width=width, seed=g2)
    assert not torch.equal(g2.get_state(), before)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), same.state_dict().values()))


def test_vgg11_dropout_probability_and_its_range():
    """dropout sets both Dropout layers' p; the range is [0, 1): 0 (no dropout) is accepted."""
    for p in (0.0, 0.3, 0.999):
        model = vgg11(width=WIDTH, seed=0, dropout=p)
        assert [m.p for m in model if isinstance(m, nn.Dropout)] == [p, p]
    assert [m.p for m in vgg11(width=WIDTH, seed=0) if isinstance(m, nn.Dropout)] == [0.5, 0.5]  # REFERENCE §4


def test_vgg11_num_classes_from_one():
    """num_classes is checked as an integer >= 1 (0 is refused in test_models): 1 is a valid head."""
    assert [m.out_features for m in vgg11(num_classes=1, width=WIDTH, seed=0) if isinstance(m, nn.Linear)] == [32, 32, 1]


def test_scaled_width_rounds_half_to_even_and_keeps_one_channel():
    """max(1, round(c * w)) with Python's round: 3 * 0.5 = 1.5 -> 2, 5 * 0.5 = 2.5 -> 2 (ties to
    even), 7 * 0.5 = 3.5 -> 4, 1 * 0.4 = 0.4 -> 0 -> 1."""
    assert [scaled_width(3, 0.5), scaled_width(5, 0.5), scaled_width(7, 0.5), scaled_width(1, 0.4)] == [2, 2, 4, 1]
    assert scaled_width(512, 2.0) == 1024


def test_count_parameters_counts_a_shared_layer_once():
    lin = nn.Linear(3, 2)  # 3 * 2 + 2 = 8 parameters
    assert count_parameters(nn.Sequential(lin, nn.ReLU(), lin)) == 8
    lin.bias.requires_grad_(False)
    assert count_parameters(nn.Sequential(lin, lin), trainable_only=True) == 6
    assert count_parameters(nn.Sequential(lin, lin)) == 8  # by default frozen parameters count too


# ----------------------------------------------------------------------------- bench: timing arithmetic
def _steps(num_clients: int, batch_size: int = 20):
    """tau_i = 1 * ceil(n_i / B) for epochs "1" on bench's data (Synthetic(1,1), data seed 0)."""
    n = LogisticProblem(synthetic(1.0, 1.0, num_clients=num_clients, seed=0)).num_samples
    return [-(-int(k) // batch_size) for k in n]


def test_bench_reports_per_round_medians_and_their_ratios_from_a_fake_clock(monkeypatch):
    """Each repetition runs every engine once (batched, simulator, reference, alternating); an
    engine's round time is its time for the run / rounds, the reported time the median over the
    repetitions; ratios and per-step costs follow. The clock is fake: each engine call moves it
    by the amounts below (starting at 100 s, so an end + start instead of end - start shows)."""
    clock = {"wall": 100.0, "cpu": 50.0}
    wall = {"batched": [0.30, 0.10, 0.20], "simulator": [1.2, 3.0, 0.8], "reference": [0.5, 0.4, 0.9]}
    cpu = {"batched": [0.2, 0.6, 0.16], "simulator": [1.0, 0.4, 2.0], "reference": [0.3, 0.8, 0.6]}
    calls = []

    def timed(name, real):
        def fn(*args, **kwargs):
            rep = calls.count(name)
            calls.append(name)
            out = real(*args, **kwargs)
            clock["wall"] += wall[name][rep]
            clock["cpu"] += cpu[name][rep]
            return out
        return fn

    monkeypatch.setattr(B, "time", SimpleNamespace(perf_counter=lambda: clock["wall"],
                                                   process_time=lambda: clock["cpu"]))
    for name, attr in (("batched", "run_batched"), ("simulator", "run_simulator"), ("reference", "run_reference")):
        monkeypatch.setattr(B, attr, timed(name, getattr(B, attr)))
    said = []
    out = B.bench_synthetic(rounds=2, repeat=3, num_clients=3, epochs="1", progress=said.append)
    r = out["results"]
    assert calls == ["batched", "simulator", "reference"] * 3
    # per round (2 rounds): batched wall .15 .05 .10 -> median .10, cpu .10 .30 .08 -> .10
    #                       simulator wall .6 1.5 .4 -> .6, cpu .5 .2 1.0 -> .5
    #                       reference wall .25 .2 .45 -> .25, cpu .15 .4 .3 -> .3
    approx = lambda v: pytest.approx(v, rel=1e-9)  # noqa: E731
    assert r["raw"]["batched"]["wall"] == [approx(0.15), approx(0.05), approx(0.10)]
    assert r["raw"]["reference"]["cpu"] == [approx(0.15), approx(0.4), approx(0.3)]
    assert (r["batched_round_s"], r["simulator_round_s"], r["reference_round_s"]) == (approx(0.1), approx(0.6),
                                                                                     approx(0.25))
    assert (r["batched_round_cpu_s"], r["simulator_round_cpu_s"], r["reference_round_cpu_s"]) == (
        approx(0.1), approx(0.5), approx(0.3))
    assert r["speedup_wall"] == approx(0.25 / 0.1) and r["speedup_cpu"] == approx(0.3 / 0.1)
    assert r["speedup_vs_simulator_wall"] == approx(0.6 / 0.1) and r["speedup_vs_simulator_cpu"] == approx(0.5 / 0.1)
    tau = _steps(3)
    assert r["client_steps_per_round"] == sum(tau) and r["max_local_steps"] == max(tau)
    assert r["critical_path_bound"] == approx(sum(tau) / max(tau))
    assert r["reference_us_per_client_step"] == approx(1e6 * 0.3 / sum(tau))
    assert r["simulator_us_per_client_step"] == approx(1e6 * 0.5 / sum(tau))
    assert r["batched_us_per_batched_step"] == approx(1e6 * 0.1 / max(tau))
    # progress: one line per measurement, the engine's ms per round (batched's first: 300 ms / 2 rounds)
    assert len(said) == 9
    assert said[0] == "repeat 1/3: batched 150.0 ms/round"
    assert said[4] == "repeat 2/3: simulator 1500.0 ms/round"
    assert said[8] == "repeat 3/3: reference 450.0 ms/round"


@pytest.mark.parametrize("factor, refused", [(1.5e-10, True), (0.5e-10, False)])
def test_bench_refuses_engines_that_disagree_by_more_than_1e_10_of_the_parameters(monkeypatch, factor, refused):
    """The engines must end within 1e-10 of max |params| (module docstring). A reference engine
    whose W is moved by factor * max|params| is refused above the bound and reported below it."""
    real, seen = B.run_reference, {}

    def moved(*args, **kwargs):
        params = {k: np.array(v, dtype=np.float64) for k, v in real(*args, **kwargs).params.items()}
        size = seen["size"] = max(float(np.max(np.abs(params[k]))) for k in ("W", "b"))
        params["W"][0, 0] += factor * size
        return {"params": params}

    monkeypatch.setattr(B, "run_reference", moved)
    kw = dict(rounds=1, repeat=1, num_clients=3, epochs="1", algorithm="scaffold")
    if refused:
        with pytest.raises(AssertionError, match=r"^the engines disagree: max \|params difference\| batched vs "
                                                 r"reference = "):
            B.bench_synthetic(**kw)
    else:
        r = B.bench_synthetic(**kw)["results"]
        # the engines agree to ~1e-16 of the size, so the reported difference is the move itself
        assert r["max_abs_param_diff_reference"] == pytest.approx(factor * seen["size"], rel=1e-3)
        assert r["max_abs_param_diff"] == r["max_abs_param_diff_reference"]


def test_bench_equal_sizes_splits_the_same_total_equally():
    """equal_sizes: the clients' total (train + test) samples summed, then split equally
    (total // m each); each client keeps int(0.9 n) for training (REFERENCE §3: 90 % train)."""
    total = sum(synthetic(1.0, 1.0, num_clients=3, seed=0).meta["total_samples"])
    cfg = B.bench_synthetic(rounds=1, repeat=1, num_clients=3, epochs="1", algorithm="scaffold",
                            equal_sizes=True)["config"]
    assert cfg["equal_sizes"] is True
    assert cfg["num_samples"] == [int(0.9 * (total // 3))] * 3


def test_bench_refuses_zero_repetitions():
    """repeat >= 1 like rounds (tests/test_bench.py checks rounds=0 only); with 0 nothing is measured."""
    with pytest.raises(ValueError, match=r"^repeat must be an integer >= 1, got 0"):
        B.bench_synthetic(rounds=1, repeat=0, num_clients=3)


def test_bench_defaults_are_the_documented_setup():
    """Module docstring and the CLI's help: Synthetic(1,1), 30 clients, data seed 0, FedNova with
    local SGD, lr 0.02, batch 20; the CLI's --rounds 5 / --repeat 3 / --epochs 2."""
    defaults = {k: p.default for k, p in inspect.signature(B.bench_synthetic).parameters.items()}
    assert defaults == dict(rounds=5, repeat=3, epochs="2", algorithm="fednova", lr=0.02, batch_size=20, alpha=1.0,
                            beta=1.0, num_clients=30, data_seed=0, seed=0, equal_sizes=False, evaluate=False,
                            progress=None)


# ----------------------------------------------------------------------------- bench: format_bench
def _results(with_sim: bool) -> dict:
    return dict(batched_round_s=0.0125, batched_round_cpu_s=0.011, reference_round_s=0.05, reference_round_cpu_s=0.04,
                simulator_round_s=0.25 if with_sim else None, simulator_round_cpu_s=0.2 if with_sim else None,
                speedup_wall=4.0, speedup_cpu=0.04 / 0.011,
                speedup_vs_simulator_wall=20.0 if with_sim else None,
                speedup_vs_simulator_cpu=0.2 / 0.011 if with_sim else None,
                client_steps_per_round=57.0, max_local_steps=30.0, critical_path_bound=1.9,
                reference_us_per_client_step=1e6 * 0.04 / 57,
                simulator_us_per_client_step=1e6 * 0.2 / 57 if with_sim else None,
                batched_us_per_batched_step=1e6 * 0.011 / 30, max_abs_param_diff=3.2e-16)


def test_format_bench_lines_with_the_simulator():
    # ms = 1e3 * s: 12.50 / 11.00, 250.00 / 200.00, 50.00 / 40.00; 0.2 / 0.011 = 18.18; 0.04 / 0.011 = 3.64;
    # us per step: 1e6 * 0.04 / 57 = 701.75, 1e6 * 0.2 / 57 = 3508.77, 1e6 * 0.011 / 30 = 366.67
    assert B.format_bench(_results(True)).splitlines() == [
        "batched engine :    12.50 ms/round (cpu 11.00 ms)",
        "simulator loop :   250.00 ms/round (cpu 200.00 ms; torch nn.Linear + autograd + optim.SGD per step)",
        "lean numpy loop:    50.00 ms/round (cpu 40.00 ms; hand-written numpy gradient per step)",
        "speedup vs simulator loop :    20.00x wall, 18.18x cpu",
        "speedup vs lean numpy loop:     4.00x wall, 3.64x cpu",
        "critical path  : sum tau_i / max tau_i = 57 / 30 = 1.90 (lock-step bound at equal per-step cost)",
        "per step (cpu) : lean loop 701.8 us per client step, simulator 3508.8 us per client step, "
        "batched 366.7 us per batched step",
        "same numbers   : max |params difference| = 3.2e-16",
    ]


def test_format_bench_lines_without_the_simulator():
    lines = B.format_bench(_results(False)).splitlines()
    assert len(lines) == 6 and not any("simulator" in line for line in lines)
    assert lines[-2] == "per step (cpu) : lean loop 701.8 us per client step, batched 366.7 us per batched step"


# ----------------------------------------------------------------------------- bench: run_simulator
def _tiny():
    prob = LogisticProblem(synthetic(num_clients=2, seed=1, num_samples=[25, 40]))
    return prob, make_epoch_schedule(prob.num_samples, 10, (1, 2), seed=3)


def test_run_simulator_defaults_seed_0_and_no_evaluation_and_takes_a_start():
    """Defaults (signature and docstring): seed 0, evaluate False (no metrics); ``params`` is the start."""
    prob, sched = _tiny()
    algo = make_algorithm("fedavg", sgd(0.1))
    got = B.run_simulator(algo, prob, sched, 2, batch_size=10)
    assert got["metrics"] == []
    same = run_batched(algo, prob, sched, 2, batch_size=10, seed=0, evaluate=False).params
    other = run_batched(algo, prob, sched, 2, batch_size=10, seed=1, evaluate=False).params
    np.testing.assert_allclose(got["params"]["W"], same["W"], rtol=0, atol=1e-12)
    assert np.max(np.abs(got["params"]["W"] - other["W"])) > 1e-6
    start = {"W": np.full((60, 10), 0.01), "b": np.linspace(-0.1, 0.1, 10)}
    got = B.run_simulator(algo, prob, sched, 1, batch_size=10, params=start)["params"]
    ref = run_batched(algo, prob, sched, 1, batch_size=10, params=start, evaluate=False).params
    for k in ("W", "b"):
        np.testing.assert_allclose(got[k], ref[k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("solver", [LocalSolver(lr=0.1, momentum=0.5, name="sgd"),
                                    LocalSolver(lr=0.1, mu=0.5, name="sgd"), sgd(0.1, weight_decay=1e-4)],
                         ids=["momentum", "prox", "weight-decay"])
def test_run_simulator_refuses_each_departure_from_plain_sgd(solver):
    """A LocalSolver named "sgd" by hand with momentum or mu set: each is refused on its own (LocalSolver's default
    name now follows its fields, "momentum" or "prox")."""
    prob, sched = _tiny()
    assert solver.name == "sgd"
    with pytest.raises(ValueError, match=r"^run_simulator runs plain local SGD only"):
        B.run_simulator(make_algorithm("fednova", solver), prob, sched, 1, batch_size=10)


def test_run_simulator_refuses_a_within_round_schedule_or_an_own_step_named_sgd():
    """run_simulator runs torch.optim.SGD(lr): a LocalSolver with an lr_schedule, which LocalSolver named "sgd", was
    run at the constant lr, its schedule ignored without a word (LocalSolver(0.1, lr_schedule=lambda k: 0.5): the
    plain lr-0.1 run's model to 8e-17, 0.039 away from the scheduled run's); so was a subclass with its own step
    named "sgd" (whatever its update does: here the built-in one). Both are refused now, by their fields, whatever
    their name."""

    class OwnUpdate(LocalSolver):
        def update(self, state, grads):
            return super().update(state, grads)

    prob, sched = _tiny()
    for solver in (LocalSolver(0.1, lr_schedule=lambda k: 0.5, name="sgd"), OwnUpdate(0.1, name="sgd")):
        with pytest.raises(ValueError, match=r"^run_simulator runs plain local SGD only \(no momentum, proximal term, "
                                             r"weight decay, within-round step-size schedule or step of its own\)$"):
            B.run_simulator(make_algorithm("fedavg", solver), prob, sched, 1, batch_size=10)


def test_run_simulator_runs_plain_sgd_whatever_its_label():
    """run_simulator decides by the solver's fields, not its name: LocalSolver(0.1, name="plain") is plain local SGD
    and runs, with run_batched's model (mutant RS4 of the f929b39..780545c pass, the name clause dropped, left alive:
    the clause refused it; it is gone)."""
    prob, sched = _tiny()
    algo = make_algorithm("fednova", LocalSolver(0.1, name="plain"))
    got = B.run_simulator(algo, prob, sched, 1, batch_size=10)["params"]
    ref = run_batched(algo, prob, sched, 1, batch_size=10, evaluate=False).params
    for k in ("W", "b"):
        np.testing.assert_allclose(got[k], ref[k], rtol=0, atol=1e-12)


def test_run_simulator_refuses_a_server_optimizer():
    prob, sched = _tiny()
    algo = make_algorithm("fednova", sgd(0.1), server=server_momentum(0.9))
    with pytest.raises(ValueError, match=r"^run_simulator applies the aggregate directly \(plain server\)"):
        B.run_simulator(algo, prob, sched, 1, batch_size=10)


# ----------------------------------------------------------------------------- report
def test_fmt_spec_s_leaves_floats_as_str():
    """Chapter 5 and ``table1`` print pre-formatted rows with spec="s": a float cell there is
    str(float) (format(0.5, "s") raises ValueError, which fmt turns into str), never an error."""
    assert fmt(0.1234567, "s") == "0.1234567" and fmt(np.float64(2.5), "s") == "2.5"
    assert markdown_table(["a", "b"], [["66.31 ± 0.2", 0.125]], spec="s").splitlines()[-1] == "| 66.31 ± 0.2 | 0.125 |"
    assert fmt(b"x") == "b'x'"  # float(b"x") is a ValueError too


# ----------------------------------------------------------------------------- run_simulator: fixed bugs
def test_run_simulator_applies_the_plain_servers_lr():
    """plain(server_lr) is a "plain" server, which run_simulator accepted, but it added the
    aggregate unscaled: with plain(0.5) it ended 0.058 away from run_batched (parameters of size
    0.10). x <- x + server_lr * D (fedlib.server.plain, eq. 4 with eta_g)."""
    prob, sched = _tiny()
    half = make_algorithm("fednova", sgd(0.1), server=plain(0.5))
    got = B.run_simulator(half, prob, sched, 2, batch_size=10)["params"]
    ref = run_batched(half, prob, sched, 2, batch_size=10, evaluate=False).params
    full = run_batched(make_algorithm("fednova", sgd(0.1)), prob, sched, 2, batch_size=10, evaluate=False).params
    for k in ("W", "b"):
        np.testing.assert_allclose(got[k], ref[k], rtol=0, atol=1e-12)
    assert np.max(np.abs(ref["W"] - full["W"])) > 1e-3  # server_lr matters on this run


class _Steps:
    """A schedule giving fixed (possibly bad) local steps."""

    def __init__(self, steps):
        self.steps = steps

    def local_steps(self, round_index):
        return np.array(self.steps)


@pytest.mark.parametrize("change, match", [
    (dict(rounds=-1), r"^rounds must be an integer >= 0, got -1"),
    (dict(rounds=2.5), r"^rounds must be an integer >= 0, got 2\.5"),
    (dict(schedule=_Steps([2.9, 3])), r"^schedule\.local_steps\(0\) must hold whole numbers"),
    (dict(schedule=_Steps([0, 3])), r"^schedule: round 0 gives participant client 0 0 local steps \(need >= 1: "),
    (dict(schedule="3 clients"), r"^schedule is for 3 clients but the problem has 2"),
    (dict(batch_size=5), r"^batch_size: schedule counts steps with batch size 10, the engine's is 5"),
    (dict(params={"W": np.zeros((3, 3)), "b": np.zeros(3)}), r"^params: W has shape \(3, 3\)"),
], ids=["negative-rounds", "fractional-rounds", "fractional-steps", "zero-steps", "other-clients",
        "other-batch-size", "params-shape"])
def test_run_simulator_checks_its_arguments_like_the_other_engines(change, match):
    """run_batched and run_reference refuse all of these; run_simulator ran rounds=-1 as 0 rounds,
    cut 2.9 steps to 2, trained a 2-client problem on a 3-client schedule and on a schedule counted
    for another batch size without a word, and failed on 2.5 rounds / a wrong start with a
    TypeError / torch's RuntimeError."""
    prob, sched = _tiny()
    kw = dict(schedule=sched, rounds=1, batch_size=10)
    kw.update(change)
    if kw["schedule"] == "3 clients":
        kw["schedule"] = FixedSteps([1, 1, 1])
    args = (make_algorithm("fednova", sgd(0.1)), prob, kw.pop("schedule"), kw.pop("rounds"))
    for engine in (run_batched, B.run_simulator):  # the same refusal as the batched engine
        with pytest.raises(ValueError, match=match):
            engine(*args, **kw)


# -------------------------------------------------------- models.count_parameters: the input checks' mutants
@pytest.mark.parametrize("flag", [1, 0, None, np.float64(1.0)])
def test_count_parameters_refuses_a_trainable_only_that_is_no_bool(flag):
    """Mutant M5: ``not isinstance(trainable_only, bool)`` -> ``isinstance(trainable_only, str)``
    (only strings refused): 1, 0, None or a numpy number would be taken by their truth value. (numpy's bool is a
    flag since 2026-12-05: ``_validate.check_flag``, as every other flag of fedlib.)"""
    with pytest.raises(ValueError, match=r"^trainable_only must be True or False, got "):
        count_parameters(torch.nn.Linear(2, 2), trainable_only=flag)


# ---------------------------- plus_minus / transposed_markdown_table: review and mutants of f37e303..6eb7195
@pytest.mark.parametrize("error", [torch.tensor(-0.1), np.array(-0.1), torch.tensor(float("nan")), True, np.True_])
def test_plus_minus_refuses_negative_errors_of_any_number_type(error):
    """``isinstance(error, numbers.Real)`` let a 0-d torch tensor or numpy array through, which fmt then
    printed as a number: ``plus_minus(0.5, torch.tensor(-0.1))`` gave '0.5 ± -0.1'; a bool gave '1 ± True'."""
    with pytest.raises(ValueError, match="standard error or deviation"):
        plus_minus(0.5, error)


def test_plus_minus_keeps_strings_and_formats_tensors():
    """A guard: a string error is a label, printed as it is (even one that reads as a negative number);
    a 0-d tensor is formatted as the number it holds."""
    assert plus_minus(0.5, "n/a") == "0.5 ± n/a"
    assert plus_minus(0.5, "-1") == "0.5 ± -1"
    assert plus_minus(torch.tensor(0.25), torch.tensor(0.0125)) == "0.25 ± 0.0125"


def test_plus_minus_default_spec_is_3g():
    """Kills P8: the default spec '.3g' -> '.4g' (every test of the suite passed an explicit spec or
    numbers with three digits)."""
    assert plus_minus(1 / 3, 1 / 30) == "0.333 ± 0.0333"


def test_plus_minus_leaves_an_error_float_rejects_with_valueerror_to_fmt():
    """Kills P9: ``except (TypeError, ValueError)`` -> ``except TypeError`` around ``float(error)``: an
    object whose ``float()`` raises ValueError is printed as ``str`` by fmt, not a crash of plus_minus."""
    class Label:
        def __float__(self):
            raise ValueError("not a number")

        def __str__(self):
            return "see text"

    assert plus_minus(0.5, Label()) == "0.5 ± see text"


def test_transposed_table_of_one_column():
    """Kills T1: ``len(header) == 0`` -> ``len(header) <= 1``: a header of one entry is a table of one
    row, the first column's values as its column heads."""
    assert transposed_markdown_table(["T"], [[100], [400]]).splitlines() == ["| T | 100 | 400 |", "|---|---|---|"]


def test_transposed_table_refuses_a_row_longer_than_the_header():
    """Kills T4: ``len(r) != len(header)`` -> ``len(r) < len(header)``: the extra cell of a longer row was
    silently dropped."""
    with pytest.raises(ValueError, match="as many cells as the header"):
        transposed_markdown_table(["T", "x"], [[1, 2], [3, 4, 5]])


def test_transposed_table_formats_the_values_with_the_spec():
    """Kills T8: the final ``markdown_table(..., spec)`` without ``spec``: the values (not only the column
    heads) follow the spec."""
    assert transposed_markdown_table(["T", "x"], [[100, 0.123456]], spec=".2g").splitlines()[2] == "| x | 0.12 |"


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
def test_plus_minus_prints_an_int_beyond_float_range_as_it_is():  # P3
    big = 10 ** 400
    assert plus_minus(big, 1) == f"{big} ± 1"


def test_plus_minus_names_the_value_first_when_both_are_not_finite():  # P7
    with pytest.raises(ValueError, match=r"^value: plus_minus needs a finite number, got nan$"):
        plus_minus(float("nan"), float("inf"))


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
def test_fmt_prints_only_a_zero_d_tensor_of_integers_as_its_int():
    """A 0-d integer tensor prints as the int it holds (``.item()``); a tensor of one or more dimensions is no
    number: one of two entries prints as ``str`` (float() of it fails), as a numpy array of two does (mutant RP2,
    ``ndim == 0`` -> ``ndim is not None``: ``.item()`` of two entries raised RuntimeError, 'a Tensor with 2
    elements cannot be converted to Scalar')."""
    assert fmt(torch.tensor(12345)) == "12345"
    assert fmt(torch.tensor([1, 2])) == "tensor([1, 2])"
    assert fmt(np.array([1, 2])) == "[1 2]"


# ------------------------------------------------------------------ mutants of 1112cf7..24d535b (fedlib/bench.py)
def test_run_simulator_names_the_problem_for_step_counts_of_another_length():
    """A schedule of the user's own without num_clients is checked round by round: two counts for a 3-client
    problem are refused at round 0 naming the problem, where run_simulator's number of clients comes from (it is
    given no p). Mutant BE1 of 1112cf7..24d535b: the round's check without its owner ('3 clients in p')."""

    class TwoCounts:
        def local_steps(self, round_index):
            return np.array([1, 1])

    prob = LogisticProblem(synthetic(num_clients=3, seed=1, num_samples=[12, 9, 15]))
    with pytest.raises(ValueError, match=r"^schedule\.local_steps\(0\) must give one step count per client \(3 clients "
                                         r"in the problem\), got shape \(2,\)$"):
        B.run_simulator(make_algorithm("fedavg", sgd(0.1)), prob, TwoCounts(), 1, batch_size=4)

"""Tests added by a mutation-testing pass over ``fedlib/engines/stacked.py``.

Each test kills mutants of the engine that the rest of the suite let survive. Everything
is tiny (6x6 images, a few samples per client, float64 on the CPU) so the file runs in
seconds; the engine is compared with :func:`fedlib.engines.stacked.reference_run` (the plain
per-client loop) or with hand-computed values.

Mutants of 677635c..166b66c and 4b42ff0, _as_param_dict and duplicate run names (fedlib/engines/stacked.py; D4 is
demo_run's in fedlib/experiments/cifar10.py, D5 reference_differences' in fedlib/experiments/custom.py) (pass
described in tests/README.md, Mutation passes):
_as_param_dict, killed by the suite:
  N1 remove the NaN/inf check; N2 ``.all()`` -> ``.any()``; N3 ``isfinite`` -> ``~isnan`` (inf passes);
  N4 always name ``runs[r].params`` (never ``model``).
Duplicate run names, killed by the suite: D1 refuse repeated empty names; D2 ``count > 1`` -> ``> 2``;
  D3 remove StackedEngine's check; D4 remove demo_run's; D5 remove reference_differences'.

Mutants of f37e303..6eb7195, the backward-hook refusal of the vmap path (fedlib/engines/stacked.py) (pass described
in tests/README.md, Mutation passes):
  killed here: S3, S4, S5.

Mutants of d562d43..c3b27eb, the stacked engine's training-mode check (its tolerance, NaN logits, output shapes)
(pass described in tests/README.md, Mutation passes).

Mutants of 86c5527..90cbd4d (engines/stacked.py) (pass described in tests/README.md, Mutation passes):
engines/stacked.py ``_non_finite``: N2 ``isfinite`` negated; N3 ``!=`` -> ``==``; N4 the cast parameter instead of
  the given one: killed by the suite. N1 drop ``source.dtype != dtype``: equivalent (it is called only when the cast
  holds NaN or inf; with the same dtype the source holds them too, so ``isfinite(source).all()`` is False anyway).

Mutants of 37f92d9..eb85c03 (fedlib/engines/stacked.py) (pass described in tests/README.md, Mutation passes; ids
skipped were drafted and not run):
killed by the suite: ST1 client_augment_params ``local_steps`` minimum 1 -> 0; ST3 _on_model casts to float32,
  not the parameters' dtype; ST4 _probing does not restore the training flags; ST6 _check_training_mode returns
  K + 1; ST7 _check_labels ``>= num_classes`` -> ``>``; ST8 _check_labels without the negative-label test; ST11
  _client_indices without the Mapping refusal; ST12 without the 0-d (a number per client) refusal; ST13 index
  bound ``>= num_train`` -> ``>``; ST15 channels_last ``bool()`` instead of check_flag; ST17 no str check of
  run.name; ST19 no check of schedule.local_steps; ST20 test labels not checked against K; ST21 no
  check_participant_steps in the round plan; ST23 load_state_dict ignores run_specs; ST24 train's callback not
  checked; ST25 max_relative_difference without the shape check; ST27 reference_run without its labels-per-image
  check; ST30 _grouped_num_classes returns K + 1.
killed here: ST5 ``evaluated.ndim != 2 or shape[0] != B`` -> ``ndim > 2``.

Mutants of f9b9704..2e0d04d (fedlib/engines/stacked.py: a subclass's own train_batch has its first batch's labels
checked; client_batch_plan / client_augment_params' names) (pass described in tests/README.md, Mutation passes):
  S1 the check never armed; S2 K + 1; S3 the vmap / grouped branches swapped; S4 the check never marked done; S5
  ``_mode_check_model`` kept; S6 K from the logits' first dimension; S7 the vmap check's K + 1; S8 the last
  segment's models checked. R4 client_batch_plan's keys swapped; R5 its round_index unchecked; R6
  client_augment_params' keys unchecked; R7 its keys checked and swapped. killed by the suite: S1-S4, S6, S7, R4,
  R5, R6. killed here: S8, R7 (S1, S2, S4, S6, S7 are killed here too). equivalent: S5 (``_mode_check_model`` is read
  only inside the check, which runs once).

Mutants of 2e0d04d..fb2fbe6 (fedlib/engines/stacked.py: _mean_std, shared by StackedEngine and reference_run) (pass
described in tests/README.md, Mutation passes):
  M1 std ``> 0`` -> ``>= 0``; M2 the finite check dropped; M3 ``ndim != 1`` -> ``> 1``; M4 the count checked on mean
  only; M5 reference_run's torch.tensor(mean) again (unchecked); M6 reference_run's channels hard-wired to 3; M7 the
  std message without "> 0"; M8 the tensors float32 whatever dtype. killed by the suite: M1, M2, M4, M5, M7. killed
  here: M6. equivalent: M3 (a value with 3 entries by len() has ndim >= 1; ndim 2 is refused either way). left
  alive: M8 (mean/std rounded to float32 in a float64 run: the engine and reference_run share the helper, and no
  public value shows the normalised batch outside a step). Later: M8 is killed by
  test_a_float64_run_normalises_with_the_float64_mean_and_std (one step against numpy's float64 step) and was
  already by test_evaluation_in_small_chunks_covers_the_whole_test_set (evaluate against a float64 forward).

Mutants of 0571233~1..165a974 (fedlib/engines/stacked.py: client_batch_plan / client_augment_params' local_steps by
check_count) (pass described in tests/README.md, Mutation passes):
  ST1 client_batch_plan's by check_int; ST2 client_augment_params' by check_int. killed by the suite: ST1, ST2.

Mutants of 1112cf7..24d535b (fedlib/engines/stacked.py: the constructor's check_schedule_size, _plan's owner,
_check_labels(mask=...)) (pass described in tests/README.md, Mutation passes):
  ST1 the constructor's check dropped; ST2 its name (runs[r].schedule) not passed; ST3 _plan's owner 'p'; ST4 the size
  checked after check_epoch_schedule; ST5 ``len(info.clients)`` -> ``len(info.sizes)``. LB1 ``|`` -> ``&``; LB2
  ``mask != 0`` -> ``== 0``; LB3 every -100 left out, whatever the mask; LB4 ``y != -100`` -> ``y >= 0`` (any
  negative padding); LB5 the first batch's mask not passed; LB6 ``y != -100`` -> ``y > -100``; LB7 the message's
  range of the labels before the padding is left out; LB8 the integer-dtype refusal after the mask; LB9 ``mask !=
  0`` -> ``mask > 0.5``. killed by the suite: ST1-ST3, LB1-LB5. killed here: ST4, LB6, LB7. equivalent: ST5
  (_RunInfo's sizes hold one entry per client), LB8 (boolean indexing keeps the dtype, the refusal reads only
  it), LB9 (the engine's masks, and train_batch's documented ones, are 0 or 1).

Mutants of fb91484..97fac41 (fedlib/engines/stacked.py: reference_run's check_schedule_size) (pass described in
tests/README.md, Mutation passes): RF1 the check dropped; RF2 the size checked after check_epoch_schedule. One at a
time, ``pytest -x`` on test_engine_semantics.py, test_stacked_engine.py and this file: killed by the suite, both
(test_engine_semantics.py::test_the_stacked_engine_refuses_an_epoch_schedule_of_other_sizes_or_batch).

Mutants of 113f0d3..a655138 (fedlib/engines/stacked.py: the refusal of parameters with gradient hooks) (pass described
in tests/README.md, Mutation passes):
  GH1 ``register_hook``'s kind dropped; GH2 ``register_post_accumulate_grad_hook``'s dropped; GH3 ``hooked[:1]``;
  GH4 ``if len(hooked) > 1``; GH5 the attribute misspelt (``_post_accumulate_grad_hook``); GH6 ``or`` -> ``and``; GH7
  ``prm._backward_hooks is not None``; GH8 ``_post_accumulate_grad_hooks ... is not None``; GH9
  ``named_parameters(recurse=False)``; GH10 ``hooked[-3:]``. killed by the suite: GH1, GH2, GH4, GH5, GH6, GH9. killed
  here: GH3, GH10 (four hooked parameters) and GH7, GH8 (hooks removed with handle.remove(), as the message says:
  torch leaves an empty dict, not None).

Mutants of 38cf0bd..f929b39 (fedlib/engines/stacked.py, 8640fc5: evaluate's _eval_models; 5be3425: train's rounds
left) (pass described in tests/README.md, Mutation passes):
  SE1 ``n > left`` -> ``>=``; SE2 the rounds-left check dropped; SE3 left = rounds (round_index ignored); SE4 the
  message's left by n; SE5 only a Mapping refused as one model (not an nn.Module); SE6 list(params)'s TypeError not
  caught; SE7 the empty-list refusal dropped; SE8 modules not read as their named_parameters; SE9 an entry not a
  mapping unrefused; SE10 only missing names refused (extra ones taken); SE11 only the missing names listed; SE12
  arrays given to torch.as_tensor unmade readable (negative strides); SE13 the number of axes compared, not the
  shape; SE14 ``params[0]`` named for every model; SE15 the model's own mapping kept, not the tensors; SE16
  ``list(params)`` again; SE17 the number of entries compared, not the shape; SE18 one differing name listed.
  killed by the suite: SE1-SE4, SE7, SE8, SE13, SE15, SE16. killed here: SE5, SE6, SE9-SE12, SE14, SE17, SE18.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec, StackedEngine, max_relative_difference, reference_run
from fedlib.schedules import FixedEpochs, FixedSteps
from fedlib.solvers import sgd
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

H = 6


class _Data:
    def __init__(self, n=24, n_test=10, seed=0):
        g = np.random.default_rng(seed)
        self.train_images = g.integers(0, 256, (n, H, H, 3), dtype=np.uint8)
        self.train_labels = g.integers(0, 3, n)
        self.test_images = g.integers(0, 256, (n_test, H, H, 3), dtype=np.uint8)
        self.test_labels = g.integers(0, 3, n_test)


def _rel(a, b):
    a = {n: t.detach() for n, t in a.items()}
    b = {n: t.detach() for n, t in b.items()}
    return max(float((a[n] - b[n]).abs().max() / b[n].abs().max().clamp_min(1e-300)) for n in b)


class _SumTerm(nn.Module):
    """Logits plus ``s.sum()``: autograd hands ``s`` an *expanded* gradient (stride 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3 * H * H, 3)
        self.s = nn.Parameter(torch.randn(2, 2))

    def forward(self, x):
        return self.lin(x.flatten(1)) + self.s.sum()


def _assert_plain_evaluation(model, data, acc, loss):
    """``acc`` and ``loss`` are the plain float64 model's test accuracy and mean cross-entropy on ``data``'s test
    images, normalised as the engine does, computed here by hand."""
    from fedlib.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD

    x = torch.as_tensor(data.test_images).double() / 255.0
    x = (x - torch.tensor(CIFAR10_MEAN, dtype=torch.float64)) / torch.tensor(CIFAR10_STD, dtype=torch.float64)
    y = torch.as_tensor(data.test_labels)
    with torch.no_grad():
        logits = model(x.permute(0, 3, 1, 2))
    assert acc == float((logits.argmax(1) == y).double().mean())
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)), rel=1e-12)


def test_expanded_gradient_of_a_single_client_is_cloned_before_weight_decay():
    """vmap path, one client (so the model axis has size 1): the gradient of ``s`` is a (1, 2, 2)
    expansion with stride 0 in its size-2 dims; weight decay updates it in place, so the engine
    must clone it (mutants: ``sz > 2``, ``st == 1`` in the expanded-gradient check)."""
    data, model = _Data(), _SumTerm().double()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05, weight_decay=0.1)), [np.arange(7)], FixedEpochs([7], 3, 1),
                  seed=1)
    eng = StackedEngine(model, data, [run], rounds=2, path="vmap", dtype=torch.float64, batch_size=3)
    eng.train()
    ref = reference_run(model, data, run, rounds=2, batch_size=3)
    assert _rel(eng.states[0].params, ref.state.params) < 1e-10
    assert _rel(eng.states[0].params, dict(model.named_parameters())) > 1e-6


def _net(seed=0, dropout=0.0):
    """A tiny ``nn.Sequential`` the grouped path takes: 6x6x3 images -> 3 logits."""
    torch.manual_seed(seed)
    layers = [nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(4 * 3 * 3, 3))


def _deep_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3))


def _plain_batch_loss(model, data, idx):
    """Mean cross-entropy of the plain float64 ``model`` on the centre crops of samples ``idx``."""
    from fedlib.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD
    x = torch.as_tensor(data.train_images[idx]).double() / 255.0
    x = (x - torch.tensor(CIFAR10_MEAN, dtype=torch.float64)) / torch.tensor(CIFAR10_STD, dtype=torch.float64)
    with torch.no_grad():
        logits = model.double()(x.permute(0, 3, 1, 2))
    return float(torch.nn.functional.cross_entropy(logits, torch.as_tensor(data.train_labels[idx])))


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_client_losses_are_the_mean_mini_batch_loss_of_the_round(path):
    """``RoundRecord.client_losses`` is each client's mean over its tau_i steps of the masked mean
    batch loss, ``train_loss`` their participation-weighted mean (mutant: ``loss_sum * taus``).
    With lr 1e-9 the parameters stay put, so every step's loss is the initial model's."""
    from fedlib.engines.stacked import client_batch_plan
    data, model = _Data(), _net()
    clients = [np.arange(0, 5), np.arange(5, 14), np.arange(14, 17)]   # 2, 3 and 1 batches of 4
    run = RunSpec(make_algorithm("fedavg", sgd(1e-9)), clients, FixedEpochs([5, 9, 3], 4, 1), seed=3)
    # a second run samples 2 of 3 clients uniformly: weights p_i m / q, which do not sum to 1
    sampled = RunSpec(make_algorithm("fedavg", sgd(1e-9)), clients, FixedEpochs([5, 9, 3], 4, 1), seed=3,
                      sampling="uniform", clients_per_round=2)
    eng = StackedEngine(model, data, [run, sampled], rounds=1, path=path, dtype=torch.float64, batch_size=4,
                        augment=False)
    rec, rec2 = eng.run_round()
    want = []
    for i, c in enumerate(clients):
        pos, counts = client_batch_plan(3, 0, i, len(c), int(-(-len(c) // 4)), 4)
        want.append(np.mean([_plain_batch_loss(model, data, c[pos[k, :counts[k]]]) for k in range(len(pos))]))
    np.testing.assert_allclose(rec.client_losses, want, rtol=1e-6)
    p = np.array([5, 9, 3]) / 17
    assert rec.train_loss == pytest.approx(float(np.dot(p, want)), rel=1e-6)
    from fedlib.sampling import sample_clients
    draw = sample_clients("uniform", p, 2, 3, 0)            # the engine's draw: same seed and round
    part, w = draw.clients, draw.weights
    np.testing.assert_array_equal(rec2.diagnostics.clients, part)
    assert len(part) == 2 and abs(w.sum() - 1) > 0.01
    np.testing.assert_allclose(rec2.client_losses, [want[i] for i in part], rtol=1e-6)
    assert rec2.train_loss == pytest.approx(float(np.dot(w, rec2.client_losses) / w.sum()), rel=1e-12)


def test_divergence_names_the_first_diverging_run_and_exactly_its_clients():
    """Two runs diverge, rows interleaved by tau: the message names the run of the first non-finite
    row and that run's clients only, by client id (mutants in the row / client bookkeeping)."""
    data = _Data(n=40)
    sizes = [8, 4]                          # tau 4 and 2 (B=4, E=2): rows fine0, A0, B0, fine1, A1, B1, B2
    cl = [np.arange(0, 8), np.arange(8, 12)]
    sched = FixedEpochs(sizes, 4, 2)
    fine = RunSpec(make_algorithm("fedavg", sgd(1e-3)), cl, sched, name="fine")
    blow_a = RunSpec(make_algorithm("fedavg", sgd(1e15)), cl, sched, seed=1, name="blowA")
    blow_b = RunSpec(make_algorithm("fedavg", sgd(1e15)), cl + [np.arange(12, 16)], FixedEpochs(sizes + [4], 4, 2),
                     seed=2, name="blowB")
    eng = StackedEngine(_deep_net(), data, [fine, blow_a, blow_b], rounds=1, batch_size=4, augment=False)
    with pytest.raises(FloatingPointError, match=r"^round 0, run 1 \(blowA\): training loss is not finite for "
                                                r"client\(s\) \[0, 1\] "):
        eng.train()


def test_a_non_finite_aggregate_names_the_run():
    """Finite losses but an infinite step (lr 1e300 is inf in float32): the algorithm's
    FloatingPointError comes out with the run named (mutant: the re-raise dropped)."""
    data = _Data()
    ok = RunSpec(make_algorithm("fedavg", sgd(0.01)), [np.arange(4)], FixedEpochs([4], 4, 1), name="ok")
    run = RunSpec(make_algorithm("fedavg", sgd(1e300)), [np.arange(4)], FixedEpochs([4], 4, 1), name="inf")
    eng = StackedEngine(_net(), data, [ok, run], rounds=1, batch_size=4, augment=False)
    with pytest.raises(FloatingPointError, match=r"^run 1 \(inf\): .*not finite"):
        eng.train()


@pytest.mark.parametrize("name, args", [("num_samples", (0, 3, 2)), ("local_steps", (5, 0, 2)),
                                        ("batch_size", (5, 3, 0))])
def test_client_batch_plan_refuses_zero_by_name(name, args):
    from fedlib.engines.stacked import client_batch_plan
    with pytest.raises(ValueError, match=name):
        client_batch_plan(0, 0, 0, *args)


def test_client_batch_plan_of_one_sample_one_step_batches_of_one():
    """The smallest legal plan (mutants: minimum 1 -> 2 in the argument checks)."""
    from fedlib.engines.stacked import client_batch_plan
    pos, counts = client_batch_plan(0, 0, 0, 1, 1, 1)
    assert pos.tolist() == [[0]] and counts.tolist() == [1]
    pos, counts = client_batch_plan(0, 0, 0, 3, 4, 1)
    assert pos.shape == (4, 1) and counts.tolist() == [1, 1, 1, 1] and sorted(pos[:3, 0].tolist()) == [0, 1, 2]
    pos, counts = client_batch_plan(0, 0, 0, 1, 2, 3)   # one sample, batch 3: padded with itself
    assert pos.tolist() == [[0, 0, 0], [0, 0, 0]] and counts.tolist() == [1, 1]


def test_client_augment_params_default_padding_is_cifars_4():
    """The documented default crop padding is 4 pixels (mutants: 4 -> 3, 5)."""
    from fedlib.engines.stacked import client_augment_params
    got = client_augment_params(0, 1, 2, 50, 8)
    want = client_augment_params(0, 1, 2, 50, 8, padding=4)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    dy, dx, _ = got
    assert int(dy.max()) == int(dx.max()) == 8 and int(dy.min()) == int(dx.min()) == 0


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_dropout_of_one_is_refused_not_skipped(path):
    """nn.Dropout(1.0) zeroes everything: the seeded masks refuse p = 1 rather than the layer being
    silently skipped (mutant: the vmap hook's ``p == 0.0`` -> ``p == 1.0``)."""
    data = _Data()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4)], FixedEpochs([4], 4, 1))
    eng = StackedEngine(_net(dropout=1.0), data, [run], rounds=1, path=path, batch_size=4, augment=False)
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\)"):
        eng.run_round()


class _Growing:
    """A schedule with no known bound: tau = 4 + round."""

    def local_steps(self, t):
        return np.array([4 + t])


def test_step_tables_grow_by_half_for_a_schedule_without_bound():
    """Unknown bound: the step tables grow to max(needed, 1.5 x capacity), so a schedule growing by one
    step a round reallocates (and drops CUDA graphs) only every few rounds (mutant: 1.5 -> 0.75).
    With a known bound they are allocated once at the bound."""
    data = _Data()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4)], _Growing())
    eng = StackedEngine(_net(), data, [run], rounds=4, batch_size=1, augment=False)
    caps = []
    for tau in (4, 5, 6, 7):
        eng._ensure_tables(tau)
        caps.append(eng._tau_cap)
    assert caps == [4, 6, 6, 9]
    bounded = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4), np.arange(4, 7)], FixedEpochs([4, 3], 2, 3))
    eng = StackedEngine(_net(), data, [bounded], rounds=1, batch_size=2, augment=False)
    eng._ensure_tables(1)
    assert eng._tau_cap == 6 and eng._lr.shape[0] == 6


def test_round_timing_counts_the_real_training_images():
    """``last_timing.images`` is the number of real (unpadded) samples trained on: the sum of the
    batch plans' counts, including a last partial epoch (mutants in ``_real_images``); ``steps`` is
    the longest client's tau."""
    from fedlib.engines.stacked import client_batch_plan
    data = _Data()
    sizes, taus = [5, 9, 3], [3, 7, 1]          # B=4: 1 epoch + 1 batch, 2 epochs + 1 batch, 1 batch
    clients = [np.arange(0, 5), np.arange(5, 14), np.arange(14, 17)]
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedSteps(taus), seed=2)
    eng = StackedEngine(_net(), data, [run], rounds=1, batch_size=4, augment=False)
    eng.run_round()
    want = sum(int(client_batch_plan(2, 0, i, n, tau, 4)[1].sum()) for i, (n, tau) in enumerate(zip(sizes, taus)))
    assert want == 9 + 22 + 3
    assert eng.last_timing.images == want and eng.last_timing.steps == 7


def test_max_relative_difference_by_hand():
    """max over tensors of max|got - want| / max|want| (mutants: * for /, + for -)."""
    from fedlib.engines.stacked import max_relative_difference
    want = {"a": torch.tensor([1.0, -4.0]), "b": torch.tensor([[10.0]])}
    got = {"a": torch.tensor([1.5, -4.0]), "b": torch.tensor([[10.0]])}
    assert max_relative_difference(got, want) == 0.125
    assert max_relative_difference(want, want) == 0.0
    assert max_relative_difference({"a": torch.tensor([1e-3])}, {"a": torch.tensor([0.0])}) > 1e290


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_evaluation_in_small_chunks_covers_the_whole_test_set(path):
    """10 test images of 6x6 in chunks of 3: every image is evaluated once (mutant: the chunk loop
    bounded by the image height instead of the number of images), accuracy and mean loss equal
    the plain model's; more models than the stack holds are refused."""
    data, model = _Data(), _net(seed=1).double()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4)], FixedEpochs([4], 4, 1))
    eng = StackedEngine(model, data, [run], rounds=1, path=path, dtype=torch.float64, batch_size=4,
                        eval_batch_size=3)
    acc, loss = eng.evaluate()
    _assert_plain_evaluation(model, data, acc[0], loss[0])
    with pytest.raises(ValueError, match="at most 1 models"):
        eng.evaluate([eng.params(0), eng.params(0)])


# ---------------------------------------- the vmap path's backward-hook refusal: mutants of f37e303..6eb7195
def test_vmap_path_refuses_backward_pre_hooks_and_names_the_first_backward_hook():
    """Kills S3 (``backward[0]`` -> ``backward[-1]``: the last of two backward hooks named), S4
    (``startswith("backward")`` -> ``== "backward hook"``: a backward pre-hook passed the check and
    failed only inside torch.func) and S5 (the model itself named ``layer 'model'``)."""
    from fedlib.engines.stacked import _SeededDropoutModule

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model.register_full_backward_pre_hook(lambda module, grad_output: None)
    with pytest.raises(ValueError, match=r"^the model \(Sequential\) has a backward pre-hook .* torch\.func"):
        _SeededDropoutModule(model)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model[0].register_full_backward_hook(lambda module, grad_in, grad_out: None)
    model[2].register_full_backward_pre_hook(lambda module, grad_output: None)
    with pytest.raises(ValueError, match=r"^layer '0' \(Linear\) has a backward hook "):
        _SeededDropoutModule(model)


# ------------------------------------------------------ the training-mode check: mutants of d562d43..c3b27eb
TRAINING_MODE = r"model computes something else in training mode than in eval mode, besides its nn\.Dropout layers"


def _images(n=16, size=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return SimpleNamespace(train_images=torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (n,), generator=g))


def _run():
    return RunSpec(make_algorithm("fedavg", sgd(lr=0.1)), [np.arange(0, 8), np.arange(8, 16)],
                   FixedSteps([1, 2]), seed=0)


def _engine(model, dtype=None):
    return StackedEngine(model, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False, dtype=dtype)


class _Offset(nn.Module):
    """Zero logits ``(B, 3)`` in eval mode; in training mode ``offset`` added to every logit."""

    def __init__(self, offset: float, dtype=torch.float32):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3, dtype=dtype)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)
        self.offset = offset

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return z + self.offset if self.training else z


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_mode_tolerance_is_64_epsilons_of_a_scale_of_at_least_one(dtype):
    """The outputs are compared up to 64 machine epsilons of max(1, max |eval logits|): here the
    eval logits are all 0, so the scale is 1 and the tolerance 64 eps (float32: 64 * 2^-23 =
    7.63e-6; float64: 64 * 2^-52 = 1.42e-14). Half of it passes (rounding), twice of it is refused
    (a scale of 0 instead of the floor 1 would refuse the first; a looser tolerance would pass the
    second)."""
    eps = torch.finfo(dtype).eps
    tol = 64 * eps * 1.0
    _engine(_Offset(0.5 * tol, dtype), dtype)
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_Offset(2.0 * tol, dtype), dtype)
    with pytest.raises(ValueError, match=TRAINING_MODE):  # 1e-4 is far above 64 eps in float32
        _engine(_Offset(1e-4, dtype), dtype)


class _NaNColumn(nn.Module):
    """Logits whose last column is NaN in both modes (e.g. a log of a negative number): the same in
    training and eval mode, so not a training-only behaviour."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3)

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return torch.cat([z[:, :2], torch.full_like(z[:, 2:], float("nan"))], dim=1)


def test_training_mode_check_counts_nan_logits_in_both_modes_as_equal():
    """NaN where both modes give NaN is no difference between the modes (equal_nan): the model is not
    refused as computing 'something else in training mode' (its NaN loss is another matter)."""
    _engine(_NaNColumn())


class _NarrowInTraining(nn.Module):
    """Zero logits, (B, 3) in eval mode but (B, 1) in training mode (a branch on self.training)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return z[:, :1] if self.training else z


def test_training_mode_check_refuses_other_output_shapes_even_where_they_broadcast():
    """Zeros (8, 1) and zeros (8, 3) are allclose by broadcasting; the shapes differ, so refused."""
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_NarrowInTraining())


class _InfColumnNoisy(_Offset):
    """Logits with an infinite last column in both modes, and ``offset`` added in training mode."""

    def forward(self, x):
        z = super().forward(x)
        return torch.cat([z[:, :2], torch.full_like(z[:, 2:], float("inf"))], dim=1)


def test_an_infinite_logit_does_not_widen_the_training_mode_tolerance():
    """The scale is the largest finite |logit| (inf counts as 0): an infinite column would otherwise
    make the tolerance infinite and pass any training-only offset; 1e-4 is far above 64 eps."""
    _engine(_InfColumnNoisy(0.0))  # inf in both modes, nothing else different: accepted
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_InfColumnNoisy(1e-4))


# ------------------------------------------------------------------------ mutants of 37f92d9..eb85c03
class _BatchSummed(nn.Module):
    """Logits summed over the batch, ``(1, 3)`` for any ``B``: the same in both modes, so the training-mode
    comparison alone passes it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3)

    def forward(self, x):
        return self.lin(x.flatten(1)).sum(0, keepdim=True)


def test_training_mode_check_refuses_logits_of_another_batch_size_or_rank():
    """``_check_training_mode`` returns K of logits ``(B, K)`` and refuses any other shape (its docstring): on
    its B = 8 inputs, a model giving ``(1, 3)`` (summed over the batch) or ``(8,)`` (one number per sample) is
    refused at construction, naming the shape and B (mutant ST5, ``ndim != 2 or shape[0] != B`` ->
    ``ndim > 2``: ``(1, 3)`` passed as K = 3 and failed in the first round's loss, ``(8,)`` failed with an
    IndexError reading K)."""
    with pytest.raises(ValueError, match=r"^model must map a batch \(B, \*feature_shape\) to logits \(B, K\), "
                                         r"got \(1, 3\) for B = 8$"):
        _engine(_BatchSummed())
    torch.manual_seed(0)
    flat = nn.Sequential(nn.Flatten(), nn.Linear(2 * 2 * 3, 1), nn.Flatten(0))
    with pytest.raises(ValueError, match=r"^model must map a batch \(B, \*feature_shape\) to logits \(B, K\), "
                                         r"got \(8,\) for B = 8$"):
        _engine(flat)


# ====================================================================== f9b9704..HEAD: client_augment_params' keys
def test_client_augment_params_draws_from_the_stream_of_round_then_client():
    """client_augment_params(seed, round_index, client, ...) draws from torch_generator(seed, 'augment', round_index,
    client), as its docstring says: the round before the client (compared with crop_flip_params on that generator).
    Kills the mutant that checks both by name and passes them swapped (each client's crops would be another
    round's)."""
    from fedlib.engines.augment import crop_flip_params
    from fedlib.engines.stacked import client_augment_params
    from fedlib.rng import torch_generator

    got = client_augment_params(3, 1, 2, local_steps=4, batch_size=5, padding=4)
    want = crop_flip_params(torch_generator(3, "augment", 1, 2), (4, 5), 4)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    swapped = client_augment_params(3, 2, 1, local_steps=4, batch_size=5, padding=4)
    assert not all(torch.equal(g, w) for g, w in zip(got, swapped))


# ====================================================================== f9b9704..HEAD: a subclass's own train_batch,
# its first batch's labels
class _CountingLabels(StackedEngine):
    """The engine's own inputs through an overridden train_batch (so K is unknown at construction), labels given
    by ``own`` (indexed like the training set), every call counted."""
    own = None
    calls = 0

    def train_batch(self, a):
        type(self).calls += 1
        x, _, mask = super().train_batch(a)
        idx, _ = self.step_indices(a)
        return x, self.own[idx].t(), mask


def _counting_run():
    return RunSpec(make_algorithm("fedavg", sgd(lr=0.1)), [np.arange(0, 12), np.arange(12, 24)], FixedSteps([2, 3]),
                   seed=0)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_a_subclass_s_first_batch_is_read_for_its_labels_once_not_every_round(path):
    """The labels of the first batch are checked when the first round starts, once: round 1 calls train_batch once
    per local step (max tau = 3 steps for the two clients together) plus once for the check, round 2 once per step
    only. Kills the mutant that never marks the check done (a check, and a device sync, every round)."""
    _CountingLabels.own = torch.as_tensor(_Data().train_labels)
    engine = _CountingLabels(_net(), _Data(), [_counting_run()], rounds=2, batch_size=4, path=path, augment=False,
                             dtype=torch.float64)
    _CountingLabels.calls = 0
    engine.run_round()
    first, _CountingLabels.calls = _CountingLabels.calls, 0
    engine.run_round()
    assert (first, _CountingLabels.calls) == (4, 3)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_a_subclass_s_labels_are_checked_against_the_width_of_the_logits(path):
    """K is the width of the logits (3 for _net), not the number of models in the first segment (2 clients) nor
    K + 1: labels 0..2 train, a label 3 in the first batch is refused as 'labels must lie in 0..2 (the model has
    3 logits), got 3..3' (every label 3). Kills the mutants that take K from the logits'
    first dimension, that add one to the vmap check's K and that check the last segment's models only."""
    _CountingLabels.own = torch.arange(24) % 3
    _CountingLabels(_net(), _Data(), [_counting_run()], rounds=1, batch_size=4, path=path, augment=False,
                    dtype=torch.float64).run_round()
    _CountingLabels.own = torch.full((24,), 3)
    engine = _CountingLabels(_net(), _Data(), [_counting_run()], rounds=1, batch_size=4, path=path, augment=False,
                             dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^_CountingLabels\.train_batch's labels y \(its first batch\): labels must "
                                         r"lie in 0\.\.2 \(the model has 3 logits\), got 3\.\.3$"):
        engine.run_round()
    # the first segment's models, all of them: labels 3 only in client 0's samples (tau 2, the client that stops
    # first), 0 in client 1's: 'got 0..3', from the batch of both models, not only the last segment's one
    _CountingLabels.own = torch.cat([torch.full((12,), 3), torch.zeros(12, dtype=torch.int64)])
    engine = _CountingLabels(_net(), _Data(), [_counting_run()], rounds=1, batch_size=4, path=path, augment=False,
                             dtype=torch.float64)
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.2 \(the model has 3 logits\), got 0\.\.3$"):
        engine.run_round()


def test_reference_run_takes_one_mean_and_std_per_channel_of_its_images():
    """reference_run checks mean and std against the channels of data.train_images, as the engine does: grayscale
    (N, 6, 6, 1) images take mean=(0.5,), std=(0.25,) and the two land together (float64, 1e-10); the default
    three CIFAR-10 entries are refused for them by the engine's message (mutant M6 of 2e0d04d..fb2fbe6: reference_run's
    check hard-wired to 3 channels)."""
    g = torch.Generator().manual_seed(1)
    data = SimpleNamespace(train_images=torch.randint(0, 256, (24, 6, 6, 1), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (24,), generator=g))

    def net():
        gen = torch.Generator().manual_seed(5)
        m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3))  # 6x6 -> 4x4x2 = 32
        with torch.no_grad():
            for prm in m.parameters():
                prm.copy_(0.3 * torch.randn(prm.shape, generator=gen))
        return m.double()

    norm = {"mean": (0.5,), "std": (0.25,)}
    run = RunSpec(make_algorithm("fednova", sgd(lr=0.1)), [np.arange(0, 12), np.arange(12, 24)], FixedSteps([2, 3]),
                  seed=0)
    engine = StackedEngine(net(), data, [run], rounds=2, batch_size=4, dtype=torch.float64, path="vmap", **norm)
    engine.train()
    loop = reference_run(net(), data, run, rounds=2, batch_size=4, **norm)
    assert max_relative_difference(engine.params(0), loop.state.params) < 1e-10
    with pytest.raises(ValueError, match=r"^mean/std must have 1 entries \(one per channel\)"):
        reference_run(net(), data, run, rounds=1, batch_size=4)


def test_a_float64_run_normalises_with_the_float64_mean_and_std():
    """dtype=torch.float64 normalises with mean and std as float64 numbers (as StackedEngine's and reference_run's
    docstrings say: ``(x / 255 - mean) / std`` in ``dtype``): one full-batch SGD step (lr = 1, fedavg, one client) of
    a linear model moves it by -lr * the cross-entropy gradient computed here in numpy, to 1e-12, in the engine (vmap
    path: the grouped one needs a convolution) and in reference_run. CIFAR-10's default constants are no float32
    numbers: rounded to float32 the step is ~4e-8 relatively off. Mutant M8 of 2e0d04d..fb2fbe6 (_mean_std's tensors
    float32 whatever dtype; the engine and reference_run share the helper, so they still agree with each other) is
    killed here in the training step (and by test_evaluation_in_small_chunks_covers_the_whole_test_set in
    evaluate), as is the float32 passed by reference_run's call alone."""
    from fedlib.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD

    g = np.random.default_rng(3)
    n, k = 8, 3
    images = g.integers(0, 256, (n, 2, 2, 3), dtype=np.uint8)
    labels = np.arange(n) % k
    data = SimpleNamespace(train_images=images, train_labels=labels)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, k)).double()
    w0, b0 = (p.detach().numpy().copy() for p in model.parameters())
    assert float(np.float32(CIFAR10_MEAN[0])) != CIFAR10_MEAN[0]  # the rounding this test would see
    # the step by hand, in float64: x in NCHW order flattened, as nn.Flatten sees it
    x = ((images.astype(np.float64) / 255.0 - np.array(CIFAR10_MEAN)) / np.array(CIFAR10_STD))
    x = x.transpose(0, 3, 1, 2).reshape(n, -1)
    z = x @ w0.T + b0
    prob = np.exp(z - z.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    dz = (prob - np.eye(k)[labels]) / n
    want = {"1.weight": -(dz.T @ x), "1.bias": -dz.sum(axis=0)}  # lr = 1
    run = RunSpec(make_algorithm("fedavg", sgd(1.0)), [np.arange(n)], FixedSteps([1]), seed=0)
    engine = StackedEngine(model, data, [run], rounds=1, path="vmap", batch_size=n, augment=False, dropout=False,
                           dtype=torch.float64)
    engine.train()
    loop = reference_run(model, data, run, rounds=1, batch_size=n, augment=False, dropout=False)
    for got in (engine.params(0), loop.state.params):
        moved = {"1.weight": got["1.weight"].detach().numpy() - w0, "1.bias": got["1.bias"].detach().numpy() - b0}
        for name, w in want.items():
            assert np.abs(moved[name] - w).max() < 1e-12 * np.abs(w).max(), name


# ---------------------------------------------------------------- mutants of 1112cf7..24d535b (engines/stacked.py)
def test_a_schedule_for_another_number_of_clients_is_named_so_before_the_epoch_check():
    """An epoch schedule counted for 3 clients on a run of 2 is refused for its size, naming runs[0].clients, not for
    'counting steps for other client sizes (3 clients, the run has 2)' (check_epoch_schedule's message, which
    tells to rebuild it from the sizes). Mutant ST4 of 1112cf7..24d535b: the size checked after the epoch check."""
    run = RunSpec(make_algorithm("fedavg", sgd(lr=0.1)), [np.arange(0, 12), np.arange(12, 24)],
                  FixedEpochs([12, 12, 12], 4, 1), seed=0)
    with pytest.raises(ValueError, match=r"^runs\[0\]\.schedule is for 3 clients but runs\[0\]\.clients has 2$"):
        StackedEngine(_net(), _Data(), [run], rounds=1, batch_size=4, augment=False, dtype=torch.float64)


class _PaddedLabels(StackedEngine):
    """The engine's own inputs through an overridden train_batch: labels ``own`` (indexed like the training set)
    where the mask is 1, ``pad`` where it is 0 (padding); ``padded`` counts the padding entries of each call."""
    own, pad, padded = None, -100, []

    def train_batch(self, a):
        x, _, mask = super().train_batch(a)
        idx, _ = self.step_indices(a)
        y = self.own[idx].t()
        type(self).padded.append(int((mask == 0).sum()))
        return x, torch.where(mask == 0, torch.full_like(y, self.pad), y), mask


def _padded(path, own, pad):
    # client 0 holds 3 samples, batch 4: its first batch (the one checked) has one padding entry
    _PaddedLabels.own, _PaddedLabels.pad, _PaddedLabels.padded = own, pad, []
    run = RunSpec(make_algorithm("fedavg", sgd(lr=0.1)), [np.arange(0, 3), np.arange(3, 24)], FixedSteps([2, 3]),
                  seed=0)
    return _PaddedLabels(_net(), _Data(), [run], rounds=1, batch_size=4, path=path, augment=False,
                         dtype=torch.float64)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_only_minus_100_under_mask_0_is_a_padding_label(path):
    """-100 (F.cross_entropy's ignore_index) where the mask is 0 trains; -101 there is refused as any label out of
    0..2 is (torch's loss fails on it all the same): 'got -101..L' with L the largest real label of the batch.
    Mutant LB6 of 1112cf7..24d535b: ``y != -100`` -> ``y > -100`` (every label below -100 passed as padding)."""
    _padded(path, torch.arange(24) % 3, -100).run_round()
    assert _PaddedLabels.padded[0] == 1
    engine = _padded(path, torch.arange(24) % 3, -101)
    with pytest.raises(ValueError, match=r"^_PaddedLabels\.train_batch's labels y \(its first batch\): labels must lie "
                                         r"in 0\.\.2 \(the model has 3 logits\), got -101\.\.[0-2]$"):
        engine.run_round()
    assert _PaddedLabels.padded[0] == 1


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_the_label_message_shows_the_labels_checked_not_the_padding(path):
    """Every real label 3 (out of 0..2), padding -100: the message shows the range of the labels the check read,
    'got 3..3', not the padding's -100 ('got -100..3', which blames the one entry that is allowed). Mutant LB7 of
    1112cf7..24d535b: the range in the message taken before the padding is left out."""
    engine = _padded(path, torch.full((24,), 3), -100)
    with pytest.raises(ValueError, match=r"^_PaddedLabels\.train_batch's labels y \(its first batch\): labels must lie "
                                         r"in 0\.\.2 \(the model has 3 logits\), got 3\.\.3$"):
        engine.run_round()
    assert _PaddedLabels.padded[0] == 1


# ---------------------------------------------------------------- mutants of 113f0d3..a655138 (engines/stacked.py)
def _hookable():
    """Parameters 0.weight, 0.bias, 3.weight, 3.bias, 5.weight, 5.bias, for the (2, 2, 3) images of _images() (the
    grouped path needs a Conv2d before Flatten)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8, 4), nn.ReLU(),
                         nn.Linear(4, 3)).double()


def _hooked_engine(model, path):
    return StackedEngine(model, _images(), [_run()], rounds=1, path=path, batch_size=4, augment=False, padding=0,
                         dtype=torch.float64)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_gradient_hooks_message_names_the_first_three_hooked_parameters(path):
    """Four parameters with gradient hooks of both kinds: the message names the first three, in the model's order.
    Mutants GH3 (``hooked[:1]``) and GH10 (``hooked[-3:]``) of 113f0d3..a655138."""
    model = _hookable()
    model[0].weight.register_hook(lambda grad: grad)
    model[3].bias.register_post_accumulate_grad_hook(lambda param: None)
    model[5].weight.register_hook(lambda grad: grad)
    model[5].bias.register_post_accumulate_grad_hook(lambda param: None)
    with pytest.raises(ValueError, match=r"^model has parameters with gradient hooks \['0\.weight', '3\.bias', "
                                         r"'5\.weight'\] \(Tensor\.register_hook or "):
        _hooked_engine(model, path)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_gradient_hooks_removed_as_the_message_says_leave_the_model_accepted(path):
    """The refusal says 'remove it (handle.remove())': a parameter whose hooks of both kinds were removed (torch
    leaves an empty dict behind, not None) is taken, and trains as reference_run does. Mutants GH7
    (``prm._backward_hooks is not None``) and GH8 (``_post_accumulate_grad_hooks ... is not None``) of
    113f0d3..a655138: refused."""
    model = _hookable()
    handles = [model[3].weight.register_hook(lambda grad: grad * 0),
               model[3].weight.register_post_accumulate_grad_hook(lambda param: param.grad.zero_())]
    for handle in handles:
        handle.remove()
    assert model[3].weight._backward_hooks is not None and model[3].weight._post_accumulate_grad_hooks is not None
    ref = reference_run(model, _images(), _run(), rounds=1, batch_size=4, augment=False, padding=0)
    engine = _hooked_engine(model, path)
    engine.train()
    assert max_relative_difference(engine.params(0), ref.state.params) < 1e-12


# --------------------------------- evaluate's check of the models it is given: mutants of 38cf0bd..f929b39 (8640fc5)
def _two_client_engine():
    data, model = _Data(), _net(seed=1).double()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(12), np.arange(12, 24)], FixedSteps([1, 1]))
    return StackedEngine(model, data, [run], rounds=1, path="vmap", dtype=torch.float64, batch_size=4,
                         augment=False), model, data


def test_evaluate_refuses_by_name_what_is_not_a_list_of_the_model_s_models():
    """evaluate(params) names what is wrong with params (8640fc5's docstring: a list of models, each a mapping name
    -> tensor or an nn.Module with the model's parameter names and shapes, a ValueError naming params[r] otherwise):
    the model itself (an nn.Sequential, iterable over its layers) is one model not in a list; an int is no list; an
    int in the list is no model; names the model lacks are named too, with the missing ones, the first five in order;
    a transposed weight (its number of entries the model's) is the wrong shape, named in the second model. Mutants of
    38cf0bd..f929b39: SE5 (only a Mapping refused as one model), SE6 (no TypeError caught: list(5)'s own error), SE9
    (an entry not a mapping unrefused: sorted(5)'s TypeError), SE10 (only missing names refused), SE11 (only the
    missing names listed), SE18 (one name listed), SE14 (params[0] named for the second model), SE17 (the number of
    entries compared, not the shape: copy_'s RuntimeError)."""
    engine, model, _ = _two_client_engine()
    own = {n: t.detach().clone() for n, t in model.named_parameters()}
    assert sorted(own) == ["0.bias", "0.weight", "4.bias", "4.weight"] and own["4.weight"].shape == (3, 36)
    with pytest.raises(ValueError, match=r"^params must be a list of models \(one mapping name -> tensor each\), got a "
                                         r"Sequential; one model: \[params\]$"):
        engine.evaluate(model)
    with pytest.raises(ValueError, match=r"^params must be a list of models, got an int$"):
        engine.evaluate(5)
    with pytest.raises(ValueError, match=r"^params\[1\] must be a mapping name -> tensor or an nn\.Module, got an "
                                         r"int$"):
        engine.evaluate([own, 5])
    with pytest.raises(ValueError, match=r"^params\[0\]: parameter names differ from the model's: \['extra'\]$"):
        engine.evaluate([dict(own, extra=own["4.bias"])])
    renamed = {"0.weight": own["0.weight"], "0.bias": own["0.bias"], "a": own["4.weight"], "b": own["4.bias"]}
    with pytest.raises(ValueError, match=r"^params\[0\]: parameter names differ from the model's: \['4\.bias', "
                                         r"'4\.weight', 'a', 'b'\]$"):
        engine.evaluate([renamed])
    with pytest.raises(ValueError, match=r"^params\[1\]: parameter '4\.weight' has shape \(36, 3\), the model's is "
                                         r"\(3, 36\)$"):
        engine.evaluate([own, dict(own, **{"4.weight": own["4.weight"].T.contiguous()})])


def test_evaluate_takes_numpy_arrays_with_negative_strides():
    """A model given as numpy arrays that are reversed views (negative strides, which torch.as_tensor refuses with
    "At least one stride in the given numpy array is negative") is evaluated with their numbers: the accuracy and mean
    loss of the plain model on the normalised test images, computed here (the stack's model, the same numbers as
    tensors, gives them too). Mutant SE12 of 38cf0bd..f929b39 (the arrays given to torch.as_tensor as they are)."""

    engine, model, data = _two_client_engine()
    reversed_views = {n: np.ascontiguousarray(t.detach().numpy()[::-1])[::-1] for n, t in model.named_parameters()}
    assert all(v.strides[0] < 0 for v in reversed_views.values())
    acc, loss = engine.evaluate([reversed_views])
    _assert_plain_evaluation(model, data, acc[0], loss[0])

"""Mutation-testing pass on ``train_runs``, ``bench_cifar10`` / ``_bench_cifar10``,
``engine_against_reference``, ``repeat_differences`` and ``check_recorded_diagnostics`` of
``fedlib/experiments/cifar10.py``: each test pins a behaviour that a surviving mutant changed,
its expected values worked out independently (by hand, from the docstrings' contracts, or by a
plain numpy loop).

Mutants of f37e303..6eb7195, ``fedlib.experiments.run_seeds`` / engine_against_reference
(fedlib/experiments/cifar10.py) (pass described in tests/README.md, Mutation passes):
  killed here: C1, C2.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/experiments/cifar10.py)
(pass described in tests/README.md, Mutation passes):
  CF1 history_record without ``clients``; CF2 plan_table1's cells without the str test; CF3 parse_bench_variant
  ``isdecimal`` -> ``isdigit``; CF4 load_data's sample unchecked. killed by the suite: CF2, CF4. killed here: CF1,
  CF3.

Mutants of 2e0d04d..fb2fbe6 (fedlib/experiments/cifar10.py: engine_against_reference's clients and
samples_per_client, parse_bench_variant's base settings) (pass described in tests/README.md, Mutation passes):
  E1 ``clients > len(split)`` -> ``> len(split) + 1``; E2 clients unchecked; E3 samples_per_client minimum 0; E4
  clients minimum 0. P1 runs unchecked; P2 path unchecked; P3 conv unchecked; P4 precision unchecked; P5 the checked
  runs not assigned. killed by the suite: E1-E4, P1-P4. killed here: P5.

Mutants of 0571233~1..165a974 (fedlib/experiments/cifar10.py: bench_cifar10's runs by check_int, steps and epochs by
check_count) (pass described in tests/README.md, Mutation passes):
  C1 runs minimum 2; C2 runs by check_count (4.0 taken); C3 steps by check_int; C4 epochs by check_int; C5 steps
  minimum 0; C6 a float epochs let through unchecked. killed by the suite: C1-C6.

Mutants of f929b39..780545c (fedlib/experiments/cifar10.py, fbcc566: train_runs' who) (pass described in
tests/README.md, Mutation passes):
  TR1 load_checkpoint's who "table1"; TR2 check_config's; TR3 the two hints swapped; TR4 save_checkpoint's; TR5 the
  default who "--checkpoint". killed here: TR1-TR5.
Mutants of cdf6ee0..fcc8b56 (fedlib/experiments/cifar10.py, 8ff7c5a: load_benchmarks' missing folder; 983fe92:
run_table1's config.data sha256 / split_sha256) (pass described in tests/README.md, Mutation passes; run cifar10's
fingerprint: test_mutation_cli_cifar10.py):
  LB1 ``is_dir()`` -> ``exists()``; LB2 the check dropped; LB3 the working folder left out of the message; LB4
  NotADirectoryError. CF5 run_table1's sha256 left out; CF6 its fingerprint left out of config.data; CF7 the split
  fingerprinted without its first client.
  killed by the suite: LB2-LB4, CF5-CF7 (test_cli_cifar10.py). killed here: LB1.
Mutants of c5aa211..361d535 (fedlib/experiments/cifar10.py, d91c06e: train_runs' resume_from; 4f038e4:
``data_fingerprint`` through the array's buffer, the fingerprint given in checkpoint_config) (pass described in
tests/README.md, Mutation passes; table1's paused_read: test_mutation_table1.py):
  RF1 resume_from without checkpoint taken; RF2 its kind not checked; RF3 its format not checked; RF4 the dict test
  dropped (a list an AttributeError); RF5 resume_from used only while the file exists; RF6 the file read again; RF7
  the fingerprint computed even where given; RF8 computed only where given; RF9 a non-dict named by its repr. DF1 the
  array hashed without ``ascontiguousarray``; DF2 hashed as a uint8 view.
  killed by the suite: RF1, RF2, RF4, RF6-RF9, DF1 (test_resume_differential.py, test_table1.py). killed here: RF3,
  RF5 (test_train_runs_resumes_from_the_document_given_and_refuses_another_format).
  equivalent: DF2 (a C-contiguous array's buffer holds the same bytes whatever dtype it is viewed as).
"""
import numpy as np
import pytest
import torch

from fedlib.experiments import cifar10 as C


# ------------------------------------------------------------------ check_recorded_diagnostics
def _sgd_fedavg_history(labels, epochs):
    """One round of plain-SGD FedAvg with E_i = ``epochs`` (a number or one per client) on the
    official split of ``labels``: tau_i = E_i ceil(n_i / 32), ||a_i||_1 = tau_i,
    tau_eff = sum p_i tau_i, w_i = p_i tau_i / tau_eff, chi2 = sum (p_i - w_i)^2 / w_i."""
    n = np.array([len(c) for c in C.official_partition(labels)], dtype=float)
    p = n / n.sum()
    tau = (np.asarray(epochs) * np.ceil(n / 32)).astype(int) * np.ones(n.size, dtype=int)
    tau_eff = float(p @ tau)
    w = p * tau / tau_eff
    return {"history": [{"round": 0, "lr": 0.05, "local_steps": tau.tolist(), "tau_eff": tau_eff,
                         "chi2": float(np.sum((p - w) ** 2 / w))}]}


def test_recorded_epochs_below_the_cells_lowest_are_refused_and_a_range_needs_not_start_at_its_low():
    labels = C.load_data(sample=True).train_labels
    # E = 1 filed as E = 2 (tau_eff and chi2 agree with the recorded steps): below 2..2, refused
    with pytest.raises(ValueError, match=r"sgd-e2-fedavg seed 0 round 0: .*whole E in 2\.\.2"):
        C.check_recorded_diagnostics({"sgd-e2-fedavg": {0: _sgd_fedavg_history(labels, 1)}}, labels)
    # E = 1 for one client only, in a 2..5 cell: refused as well
    epochs = np.full(16, 3)
    epochs[5] = 1
    with pytest.raises(ValueError, match=r"whole E in 2\.\.5"):
        C.check_recorded_diagnostics({"sgd-u25-fedavg": {0: _sgd_fedavg_history(labels, epochs)}}, labels)
    # E = 3 everywhere in a 2..5 cell: inside the range (its low 2 need not be drawn), errors 0
    rows = C.check_recorded_diagnostics({"sgd-u25-fedavg": {0: _sgd_fedavg_history(labels, 3)}}, labels)
    assert rows[0]["epochs_drawn"] == [3]
    assert rows[0]["tau_eff_rel_error"] < 1e-12 and rows[0]["chi2_abs_error"] < 1e-12


# ------------------------------------------------------------------ train_runs
@pytest.fixture(scope="module")
def tiny_cifar():
    """The first 300 training / 20 test images of the shipped sample (Dir(0.1) still gives 16 clients)."""
    from fedlib.data.cifar10 import Cifar10Arrays

    d = C.load_data(sample=True)
    return Cifar10Arrays(d.train_images[:300], d.train_labels[:300], d.test_images[:20], d.test_labels[:20], "tiny")


def _one_run(lr=0.05, seed=0):
    from fedlib.algorithms import make_algorithm
    from fedlib.solvers import sgd

    return [{"algorithm": make_algorithm("fedavg", sgd(lr)), "epochs": "2", "seed": seed, "name": "a"}]


def test_train_runs_default_width_is_the_full_vgg11(tiny_cifar, monkeypatch):
    """``width: float = 1.0``: every model train_runs builds is ``vgg11(width=1.0)`` unless told
    otherwise (spied on, and built at width 0.03 so the test stays cheap)."""
    import fedlib.models as models

    real, widths = models.vgg11, []

    def spy(width=1.0, **kw):
        widths.append(width)
        return real(width=0.03, **kw)

    monkeypatch.setattr(models, "vgg11", spy)
    parts = C.official_partition(tiny_cifar.train_labels)
    C.train_runs(_one_run(), tiny_cifar, parts, rounds=1, device="cpu")
    assert widths and set(widths) == {1.0}
    widths.clear()
    C.train_runs(_one_run(), tiny_cifar, parts, rounds=1, width=0.5, device="cpu")
    assert widths and set(widths) == {0.5}


def test_train_runs_lr_decay_step_and_constant_by_hand(tiny_cifar):
    """``lr_decay="step"``: paper §6's /10 at 50 % and /100 at 75 % of the rounds; with 4 rounds the
    milestones are rounds floor(0.5 * 4 + 1/2) = 2 and floor(0.75 * 4 + 1/2) = 3, so the recorded
    rates are 0.05, 0.05, 0.005, 0.0005. ``"constant"``: 0.05 in every round."""
    parts = C.official_partition(tiny_cifar.train_labels)
    kw = dict(rounds=4, width=0.03, device="cpu")
    step = C.train_runs(_one_run(), tiny_cifar, parts, lr_decay="step", **kw)
    assert [h["lr"] for h in step["histories"][0]] == pytest.approx([0.05, 0.05, 0.005, 0.0005], rel=1e-12)
    const = C.train_runs(_one_run(), tiny_cifar, parts, lr_decay="constant", **kw)
    assert [h["lr"] for h in const["histories"][0]] == [0.05] * 4
    default = C.train_runs(_one_run(), tiny_cifar, parts, **kw)  # the default is the paper's step decay
    assert [h["lr"] for h in default["histories"][0]] == [h["lr"] for h in step["histories"][0]]


# ------------------------------------------------------------------ engine_against_reference
def test_engine_against_reference_models_solvers_and_seconds(monkeypatch):
    """The docstring's contract: runs r = 0, 1, 2 start from ``vgg11(width, seed + r)`` with the
    default ``seed = 0``; FedAvg and FedNova use Table 1's momentum rows' local solver (momentum
    0.9, weight decay 1e-4), FedNova-VR Table 1's SGD rows' (lr 0.05, weight decay 1e-4); every entry of ``seconds`` is a duration
    within the call."""
    import time

    import fedlib.models as models
    import fedlib.solvers as solvers

    real_vgg, real_mom, real_sgd, seeds, moms, sgds = models.vgg11, solvers.momentum_sgd, solvers.sgd, [], [], []

    def vgg_spy(width=1.0, seed=0, **kw):
        seeds.append(seed)
        return real_vgg(width=width, seed=seed, **kw)

    def mom_spy(lr, momentum, **kw):
        moms.append((momentum, kw.get("weight_decay")))
        return real_mom(lr, momentum, **kw)

    import fedlib.engines.stacked as stacked

    real_ref, refs = stacked.reference_run, []

    def ref_spy(*args, **kw):
        refs.append(real_ref(*args, **kw))
        return refs[-1]

    def sgd_spy(lr, **kw):
        sgds.append((lr, kw.get("weight_decay")))
        return real_sgd(lr, **kw)

    monkeypatch.setattr(models, "vgg11", vgg_spy)
    monkeypatch.setattr(solvers, "momentum_sgd", mom_spy)
    monkeypatch.setattr(solvers, "sgd", sgd_spy)
    monkeypatch.setattr(stacked, "reference_run", ref_spy)
    start = time.perf_counter()
    out = C.engine_against_reference(width=0.03, rounds=1, clients=2, samples_per_client=10, batch_size=4,
                                     variants={"grouped": {"path": "grouped"}})
    took = time.perf_counter() - start
    assert sorted(set(seeds)) == [0, 1, 2] and seeds.count(0) >= 2  # the runs' 0, 1, 2 and the template's 0
    assert moms == [(0.9, 1e-4), (0.9, 1e-4)] and sgds == [(0.05, 1e-4)]
    assert set(out["seconds"]) == {"per-client loop", "grouped"}
    assert all(0 <= s <= took for s in out["seconds"].values()), out["seconds"]
    assert sum(out["seconds"].values()) <= took
    # moved = ||x_T - x_0|| / ||x_0|| over all parameters, x_0 = vgg11(0.03, seed=r), x_T the reference's
    assert [r["run"] for r in out["rows"]] == ["FedAvg, momentum", "FedNova, momentum", "FedNova-VR, SGD"]
    for r, (row, ref) in enumerate(zip(out["rows"], refs)):
        x0 = {n: p.detach().double().numpy() for n, p in real_vgg(width=0.03, seed=r).named_parameters()}
        xt = {n: np.asarray(v.detach().cpu().double()) for n, v in ref.state.params.items()}
        assert set(xt) == set(x0)
        want = np.sqrt(sum(((xt[n] - x0[n]) ** 2).sum() for n in x0) / sum((x0[n] ** 2).sum() for n in x0))
        assert 1e-4 < want < 1 and row["moved"] == pytest.approx(want, rel=1e-9)


# ------------------------------------------------------------------ bench_cifar10 / _bench_cifar10
def test_bench_cifar10_defaults_and_its_round_by_hand(tiny_cifar, monkeypatch):
    """All defaults but the device: width 1.0, steps 20, E = 2, B = 32, repeat 2, seed 0, one run
    (every model is spied on and built at width 0.03). The round by hand: tau_i = 2 ceil(n_i / 32)
    scaled so the longest client does 20 steps (at least 1); a client's step k takes batch
    k mod ceil(n_i / 32) of its shuffled data, min(32, n_i - 32 b) real images. The sequential loop
    gathers exactly those batches in each of its 1 + 2 rounds (warm-up, then ``repeat``), and the
    rates are those images over the reported seconds."""
    import math

    import fedlib.engines.augment as augment
    import fedlib.engines.stacked  # noqa: F401  (before the spy: imported after it, its module-level
    import fedlib.models as models  # "from .augment import crop_flip_gather" kept the spy for the process)

    real_vgg, real_crop, built, batches = models.vgg11, augment.crop_flip_gather, [], []

    import torch

    loads, optimizer_calls = [], []

    def vgg_spy(width=1.0, seed=0, **kw):
        built.append((width, seed))
        model = real_vgg(width=0.03, seed=seed, **kw)
        if len(built) == 1:  # the sequential loop's model: every client starts from the global weights
            real_load = model.load_state_dict
            model.load_state_dict = lambda state, *a, **k: loads.append(len(batches)) or real_load(state, *a, **k)
        return model

    offsets = {"dy": set(), "dx": set(), "flip": set()}

    def crop_spy(images, sel, dy, dx, fl, *args, **kw):
        batches.append(int(sel.numel()))
        for key, v in (("dy", dy), ("dx", dx), ("flip", fl)):
            offsets[key].update(v.tolist())
        return real_crop(images, sel, dy, dx, fl, *args, **kw)

    class SGDSpy(torch.optim.SGD):
        def __init__(self, params, **kw):
            optimizer_calls.append(("init", kw))
            super().__init__(params, **kw)

        def zero_grad(self, *a, **k):
            optimizer_calls.append("zero_grad")
            return super().zero_grad(*a, **k)

        def step(self, *a, **k):
            optimizer_calls.append("step")
            return super().step(*a, **k)

    monkeypatch.setattr(models, "vgg11", vgg_spy)
    monkeypatch.setattr(augment, "crop_flip_gather", crop_spy)
    monkeypatch.setattr(torch.optim, "SGD", SGDSpy)
    msgs = []
    out = C.bench_cifar10(tiny_cifar, device="cpu", progress=msgs.append)
    cfg, res = out["config"], out["results"]

    sizes = [len(c) for c in C.official_partition(tiny_cifar.train_labels)]
    spe = [math.ceil(n / 32) for n in sizes]
    longest = max(2 * s for s in spe)
    tau = [max(1, round(2 * s * (20 / longest))) for s in spe]
    images = sum(min(32, n - 32 * (k % s)) for n, s, t in zip(sizes, spe, tau) for k in range(t))

    assert {w for w, _ in built} == {1.0} and {s for _, s in built} == {0}
    assert (cfg["width"], cfg["steps"], cfg["epochs"], cfg["batch_size"], cfg["repeat"], cfg["runs"]) == \
        (1.0, 20, 2, 32, 2, 1)
    assert (cfg["num_clients"], cfg["num_train"], cfg["compare"]) == (16, 300, [])
    assert cfg["client_sizes"] == sizes and cfg["local_steps"] == tau
    assert res["images_per_round"] == images and res["runs_stacked"] == 1
    assert (res["max_local_steps"], res["sum_local_steps"]) == (20, sum(tau))
    assert res["prefix_efficiency"] == pytest.approx(sum(tau) / (16 * 20), rel=1e-12)
    # the sequential loop: 3 rounds (warm-up + 2 timed) of every client's tau_i batches
    assert len(batches) == 3 * sum(tau) and sum(batches) == 3 * images
    # random 32 x 32 crops of the 4-pixel padded 40 x 40 images: offsets 0..8 (all drawn), flips 0/1
    assert offsets == {"dy": set(range(9)), "dx": set(range(9)), "flip": {0, 1}}
    # ... each batch one SGD step (lr 0.05, weight decay 1e-4) with fresh gradients, each client
    # of each round starting from the global weights (loaded before its first batch)
    assert optimizer_calls[0] == ("init", {"lr": 0.05, "weight_decay": 1e-4})
    assert optimizer_calls[1:] == ["zero_grad", "step"] * (3 * sum(tau))
    starts = np.cumsum([0] + tau * 3)[:-1].tolist()
    assert loads == starts
    assert res["sequential_images_per_s"] * res["sequential_seconds"] == pytest.approx(images, rel=1e-12)
    assert res["engine_images_per_s"] * res["engine_seconds"] == pytest.approx(images, rel=1e-12)
    assert res["ratio"] == pytest.approx(res["sequential_seconds"] / res["engine_seconds"], rel=1e-12)
    assert "variants" not in res and "profile" not in out
    for side in ("sequential", "engine"):
        mine = [m for m in msgs if m.startswith(f"{side} round ")]
        assert [m.split(":")[0] for m in mine] == [f"{side} round {r}" for r in range(3)]
        assert [m.endswith("(warm-up)") for m in mine] == [True, False, False]


@pytest.mark.parametrize("bad, match", [
    (dict(runs=0), r"^runs must be an integer >= 1, got 0$"),
    (dict(runs=True), r"^runs must be an integer >= 1, got True$"),
    (dict(runs=2.0), r"^runs must be an integer >= 1, got 2\.0$"),
    (dict(batch_size=0), "batch_size"), (dict(batch_size=2.5), "batch_size"), (dict(batch_size=True), "batch_size"),
    (dict(precision="fp64"), "precision"), (dict(conv="winograd"), "conv"), (dict(repeat=0), "repeat"),
])
def test_bench_cifar10_refuses_bad_runs_batch_size_precision_conv_repeat_before_timing(tiny_cifar, bad, match):
    """The benchmark's settings are checked before anything is timed (``precision``: fp32 or bf16
    only, the engine's choices; ``conv``: cudnn or gemm)."""
    said = []
    kw = dict(width=0.03, steps=1, repeat=1, device="cpu", progress=said.append)
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        C.bench_cifar10(tiny_cifar, **kw)
    assert said == []  # nothing was timed


def test_bench_cifar10_takes_a_numpy_integer_runs(monkeypatch):
    """``runs=np.int64(2)`` is an integer (check_int's convention, which parse_bench_variant follows): it was
    refused with "runs must be an integer >= 1, got np.int64(2)"; it reaches the benchmark as the int 2."""
    seen = {}
    monkeypatch.setattr(C, "_bench_cifar10", lambda data, **kw: seen.update(kw))
    C.bench_cifar10(None, runs=np.int64(2), device="cpu", compare=["base"])
    assert seen["runs"] == 2 and type(seen["runs"]) is int


def test_bench_cifar10_a_failing_variant_is_recorded_and_the_next_one_runs(tiny_cifar, monkeypatch):
    """"A variant that raises (out of memory, a kernel the device lacks...) is recorded with its
    ``error`` instead of rates, and the next one runs" — here on a CPU: an engine of 2 stacked
    runs raises, the ``base`` variant after it is measured."""
    import fedlib.engines.stacked as stacked

    real = stacked.StackedEngine

    class Failing(real):
        def __init__(self, model, data, specs, **kw):
            if len(specs) == 2:
                raise RuntimeError("no room for two runs")
            super().__init__(model, data, specs, **kw)

    monkeypatch.setattr(stacked, "StackedEngine", Failing)
    said = []
    out = C.bench_cifar10(tiny_cifar, width=0.03, steps=1, repeat=1, device="cpu", compare=["runs=2", "base"],
                          progress=said.append)
    failed, base = out["results"]["variants"]
    assert failed == {"variant": "runs=2", "settings": failed["settings"], "error": "RuntimeError: no room for two runs"}
    assert failed["settings"]["runs"] == 2
    assert base["variant"] == "base" and base["engine_seconds"] > 0 and "error" not in base
    assert base["gain"] == pytest.approx(base["engine_images_per_s"] / out["results"]["engine_images_per_s"])
    assert "engine, runs=2: failed: RuntimeError: no room for two runs" in said


@pytest.mark.parametrize("precision, dtype, autocast", [("fp32", "float32", "fp32"), ("fp64", "float64", "fp32"),
                                                        ("bf16", "float32", "bf16")])
def test_train_runs_precision_reaches_the_engine(tiny_cifar, monkeypatch, precision, dtype, autocast):
    """``precision``: fp32, bf16 (autocast over float32 parameters) or fp64 (float64 parameters)."""
    import torch

    import fedlib.engines.stacked as stacked

    seen = []

    class Spy(stacked.StackedEngine):
        def __init__(self, *a, **kw):
            seen.append((kw["dtype"], kw["precision"]))
            super().__init__(*a, **kw)

    monkeypatch.setattr(stacked, "StackedEngine", Spy)
    C.train_runs(_one_run(), tiny_cifar, C.official_partition(tiny_cifar.train_labels), rounds=1, width=0.03,
                 device="cpu", precision=precision)
    assert seen == [(getattr(torch, dtype), autocast)]


def test_train_runs_checkpoint_records_each_calls_info_and_its_own_config(tiny_cifar, tmp_path):
    """The checkpoint keeps ``call_info`` of every call that trained the group (``calls_before``
    of a resumed call: the earlier ones), and a ``checkpoint_config`` given by the caller is what
    a resume is checked against (another one is refused)."""
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    parts = C.official_partition(tiny_cifar.train_labels)
    ck = tmp_path / "g.ckpt"
    kw = dict(rounds=2, width=0.03, device="cpu", checkpoint=ck, checkpoint_config={"group": "x"})
    first = C.train_runs(_one_run(), tiny_cifar, parts, **kw, call_info={"commit": "abc"},
                         callback=lambda t, r, s: False)
    assert first["stopped"] and first["calls_before"] == []
    doc = load_checkpoint(ck, kind="table1")
    call1 = {"commit": "abc", "cuda_graph": False, "rounds": [0, 1]}  # + each call's CUDA-graph setting and rounds
    assert doc["extra"]["calls"] == [call1]
    assert doc["config"]["group"] == "x" and "width" not in doc["config"]  # the caller's config (+ the data)
    with pytest.raises(CheckpointError, match="group"):
        C.train_runs(_one_run(), tiny_cifar, parts, **{**kw, "checkpoint_config": {"group": "y"}})
    second = C.train_runs(_one_run(), tiny_cifar, parts, **kw, call_info={"commit": "def"})
    assert second["resumed_from"] == 1 and second["calls_before"] == [call1]
    assert load_checkpoint(ck, kind="table1")["extra"]["calls"] == [
        call1, {"commit": "def", "cuda_graph": False, "rounds": [1, 2]}]


def test_train_runs_checkpoint_messages_start_with_who_and_give_its_hint(tiny_cifar, tmp_path):
    """``who`` (fbcc566) starts every checkpoint message of train_runs, reading (a file that is no checkpoint),
    checking (a checkpoint of another configuration: run cifar10's hint says to continue it or start afresh with
    another --checkpoint, table1's, the default, to finish that group) and writing (a folder gone before the first
    save). Mutants of f929b39..780545c: TR1 (load_checkpoint's who "table1"), TR2 (check_config's), TR3 (the hints
    swapped), TR4 (save_checkpoint's), TR5 (the default who "--checkpoint")."""
    from fedlib.checkpoint import CheckpointError, save_checkpoint

    parts = C.official_partition(tiny_cifar.train_labels)
    ck = tmp_path / "g.ckpt"
    kw = dict(rounds=2, width=0.03, device="cpu", checkpoint=ck, checkpoint_config={"group": "x"})
    ck.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=rf"^--checkpoint: checkpoint {ck} is corrupt or not a fedlib checkpoint"):
        C.train_runs(_one_run(), tiny_cifar, parts, **kw, who="--checkpoint")
    save_checkpoint(ck, config={"group": "y"}, round_done=1, state={}, history=[], kind="table1")
    with pytest.raises(CheckpointError, match=rf"^--checkpoint: checkpoint {ck} was written by another configuration; "
                                              r"differing keys: .*group \(checkpoint 'y', now 'x'\).*; run with the "
                                              r"checkpoint's settings to continue it, or start afresh with another "
                                              r"--checkpoint \(or delete the file\)$"):
        C.train_runs(_one_run(), tiny_cifar, parts, **kw, who="--checkpoint")
    with pytest.raises(CheckpointError, match=rf"^table1: checkpoint {ck} was written by another configuration; .*; "
                                              r"run with the checkpoint's settings to finish that group, or delete "
                                              r"the file to train it afresh$"):
        C.train_runs(_one_run(), tiny_cifar, parts, **kw)
    gone = tmp_path / "gone" / "g.ckpt"
    with pytest.raises(CheckpointError, match=rf"^--checkpoint {gone}: folder {gone.parent} does not exist$"):
        C.train_runs(_one_run(), tiny_cifar, parts, **{**kw, "rounds": 1, "checkpoint": gone}, who="--checkpoint")


def test_bench_cifar10_takes_one_epoch_and_batches_of_one(tiny_cifar):
    """``epochs`` and ``batch_size`` are whole numbers >= 1: E = 1 and B = 1 are rounds like any
    other (tau_i = ceil(n_i / B) = n_i with B = 1, scaled to the 2 steps of the longest client)."""
    out = C.bench_cifar10(tiny_cifar, width=0.03, steps=2, repeat=1, device="cpu", epochs=1, batch_size=1)
    sizes = [len(c) for c in C.official_partition(tiny_cifar.train_labels)]
    tau = [max(1, round(n * (2 / max(sizes)))) for n in sizes]
    assert (out["config"]["epochs"], out["config"]["batch_size"]) == (1, 1)
    assert out["config"]["local_steps"] == tau and out["results"]["images_per_round"] == sum(tau)


# ----------------------------------------- run_seeds / engine_against_reference: mutants of f37e303..6eb7195
def test_engine_against_reference_draws_the_model_and_epochs_of_the_run_seed(monkeypatch):
    """Kills C1 (``RandomEpochs(..., seed=seed + r)``) and C2 (``vgg11(width, seed=seed + r)``): only the
    RunSpec's seed was checked, so chapter seed 1's first run could keep seed 0's second run's initial
    model and epoch draws."""
    import fedlib.engines.stacked as stacked
    from fedlib.experiments import cifar10 as C
    from fedlib.models import vgg11

    class Captured(Exception):
        pass

    def capture(model, train, run, **kwargs):
        raise Captured(run)

    monkeypatch.setattr(stacked, "reference_run", capture)
    with pytest.raises(Captured) as info:
        C.engine_against_reference(width=1 / 32, rounds=1, clients=2, samples_per_client=8, batch_size=4, seed=1)
    run = info.value.args[0]
    assert run.seed == 3 and run.schedule.seed == 3
    expected = {n: p.detach().double() for n, p in vgg11(width=1 / 32, seed=3).named_parameters()}
    assert run.params.keys() == expected.keys()
    assert all(torch.equal(run.params[n], expected[n]) for n in expected)


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
def test_history_record_names_the_participants_in_the_order_of_their_steps():
    """A result-file history entry names the round's participants, in the order of ``local_steps`` (mutant CF1,
    the ``clients`` key dropped: a sampled run's steps belonged to no one); the other fields as plain numbers."""
    from types import SimpleNamespace

    d = SimpleNamespace(tau_eff=np.float64(4.0), chi2=np.float64(0.0), clients=np.array([2, 0]),
                        local_steps=np.array([3, 5]))
    rec = SimpleNamespace(round=np.int64(1), train_loss=0.5, test_accuracy=0.25, test_loss=1.5, diagnostics=d,
                          lr=np.float32(0.125))
    entry = C.history_record(rec)
    assert entry == {"round": 1, "train_loss": 0.5, "test_accuracy": 0.25, "test_loss": 1.5, "tau_eff": 4.0,
                     "chi2": 0.0, "clients": [2, 0], "local_steps": [3, 5], "lr": 0.125}
    assert all(type(c) is int for c in entry["clients"] + entry["local_steps"])


def test_parse_bench_variant_names_a_superscript_run_count():
    """``runs=N`` needs a whole number in decimal digits: '²' (a digit to ``str.isdigit``, which ``int`` refuses) is
    named as the variant's bad count (mutant CF3, ``isdecimal`` -> ``isdigit``: int's 'invalid literal for int()
    with base 10', naming no variant)."""
    kw = dict(runs=1, precision="fp32", cuda_graph=False, path="vmap", cudnn_bench=False, cuda=False)
    with pytest.raises(ValueError, match=r"^variant 'runs=²': runs=N needs a whole number N >= 1, got '²'$"):
        C.parse_bench_variant("runs=²", **kw)
    assert C.parse_bench_variant("runs=12", **kw)["runs"] == 12


def test_parse_bench_variant_gives_the_base_runs_as_a_python_int():
    """parse_bench_variant returns the base engine's runs as check_int returns it: a numpy integer (a count computed
    with numpy) comes back as a Python int, so the settings are plain JSON like the other variants' (mutant P5 of
    2e0d04d..fb2fbe6: the check's result not assigned, np.int64(4) kept, which json cannot write)."""
    import json

    base = dict(runs=np.int64(4), precision="fp32", cuda_graph=False, path="grouped", cudnn_bench=False, cuda=False)
    for text in ("base", "cudnn-benchmark"):
        settings = C.parse_bench_variant(text, **base)
        assert type(settings["runs"]) is int and settings["runs"] == 4
        assert json.loads(json.dumps(settings))["runs"] == 4


# ------------------------------------------------- load_benchmarks' folder: mutants of cdf6ee0..fcc8b56 (8ff7c5a)
def test_load_benchmarks_refuses_a_file_given_for_its_folder(tmp_path, monkeypatch):
    """load_benchmarks of a file (a benchmark's own JSON file given for its folder) is no folder: FileNotFoundError
    naming it and the working folder, as for a path that does not exist. Mutant of cdf6ee0..fcc8b56: LB1
    (``exists()`` for ``is_dir()``: the file read as a folder holding no benchmark, [])."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cifar10-bench.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as err:
        C.load_benchmarks("cifar10-bench.json")
    assert str(err.value) == f"cifar10-bench.json: no such folder (relative to the working folder {os.getcwd()})"


def test_train_runs_resumes_from_the_document_given_and_refuses_another_format(tiny_cifar, tmp_path):
    """``resume_from`` is the checkpoint as the caller read it: the run resumes from it even where the file has gone
    since (moved away here; its later checkpoints are written to ``checkpoint`` again), with the rounds it recorded;
    a document of another checkpoint format is refused by name, before the engine is built. Mutants of
    c5aa211..361d535: RF5 (resume_from used only while the file exists: round 0 trained again), RF3 (the format not
    checked)."""
    from fedlib.checkpoint import load_checkpoint

    parts = C.official_partition(tiny_cifar.train_labels)
    ck = tmp_path / "g.ckpt"
    kw = dict(rounds=2, width=0.03, device="cpu", checkpoint=ck)
    assert C.train_runs(_one_run(), tiny_cifar, parts, **kw, callback=lambda t, r, s: False)["stopped"]
    doc = load_checkpoint(ck, kind="table1")
    assert doc["round"] == 1
    ck.rename(tmp_path / "moved.ckpt")
    res = C.train_runs(_one_run(), tiny_cifar, parts, **kw, resume_from=doc)
    assert res["resumed_from"] == 1 and res["histories"][0][:1] == doc["extra"]["histories"][0]
    assert [r["round"] for r in res["histories"][0]] == [0, 1] and load_checkpoint(ck, kind="table1")["round"] == 2
    with pytest.raises(ValueError, match=r"^resume_from must be a checkpoint of train_runs as "
                                         r"fedlib\.checkpoint\.load_checkpoint\(checkpoint, kind='table1'\) returns "
                                         r"it, got a dict of format 'fedlib\.checkpoint/0' and kind 'table1'$"):
        C.train_runs(_one_run(), tiny_cifar, parts, **kw, resume_from={**doc, "format": "fedlib.checkpoint/0"})

"""Mutation-testing pass on ``train_runs``, ``bench_cifar10`` / ``_bench_cifar10``,
``engine_against_reference``, ``repeat_differences`` and ``check_recorded_diagnostics`` of
``fedlib/experiments/cifar10.py``: each test pins a behaviour that a surviving mutant changed,
its expected values worked out independently (by hand, from the docstrings' contracts, or by a
plain numpy loop)."""
import numpy as np
import pytest

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
    0.9, weight decay 1e-4), FedNova-VR plain SGD; every entry of ``seconds`` is a duration
    within the call."""
    import time

    import fedlib.models as models
    import fedlib.solvers as solvers

    real_vgg, real_mom, seeds, moms = models.vgg11, solvers.momentum_sgd, [], []

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

    monkeypatch.setattr(models, "vgg11", vgg_spy)
    monkeypatch.setattr(solvers, "momentum_sgd", mom_spy)
    monkeypatch.setattr(stacked, "reference_run", ref_spy)
    start = time.perf_counter()
    out = C.engine_against_reference(width=0.03, rounds=1, clients=2, samples_per_client=10, batch_size=4,
                                     variants={"grouped": {"path": "grouped"}})
    took = time.perf_counter() - start
    assert sorted(set(seeds)) == [0, 1, 2] and seeds.count(0) >= 2  # the runs' 0, 1, 2 and the template's 0
    assert moms == [(0.9, 1e-4), (0.9, 1e-4)]
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

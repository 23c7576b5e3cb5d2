"""Mutation-testing pass on the non-Table-1 parts of ``fedlib/experiments/cifar10.py`` (data,
fingerprint, ``train_runs``, the benchmark helpers, the chapter-5 helpers) and on
``fedlib/problems/quadratic.py``: each test pins behaviour that a surviving mutant changed, with
its expected value worked out independently (by hand, from REFERENCE.md §4, or by a plain
numpy computation). Training tests use tiny synthetic images, width 0.03 and one round.

Mutants of random_quadratic's eig_range check (fedlib/problems/quadratic.py), of the 37-mutant input-check run
(described in tests/README.md, Mutation passes):
  killed here: Q2, Q7 (the tests' docstrings say which change).

Mutants of efe3bcd..52ae29d, fedlib/experiments/cifar10.py's result_name and round_work (pass described in
tests/README.md, Mutation passes):
  C1-C5 cifar10: result_name cell_id / seed, round_work num_train >= 0 / num_test unchecked / >= -5.
  all killed by the suite.
"""
import math

import numpy as np
import pytest

from fedlib.experiments import cifar10 as C
from fedlib.problems.quadratic import QuadraticProblem, random_quadratic


# ------------------------------------------------------------------ quadratic.py
@pytest.mark.parametrize("high", [float("nan"), float("inf")])
def test_random_quadratic_refuses_a_non_finite_upper_eigenvalue(high):
    # nan / inf passed the low <= high check and raised numpy's OverflowError from uniform()
    with pytest.raises(ValueError, match=r"^eig_range\[1\] must be a finite number > 0, got "):
        random_quadratic(2, 3, eig_range=(0.5, high))


def test_quadratic_loss_and_gradients_by_hand():
    # F_1 = 1/2 (2 x0^2 + 4 x1^2) - (x0 + x1), F_2 = 1/2 (x0^2 + x1^2) - 2 x1; p = (0.25, 0.75)
    H = np.array([[[2.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    e = np.array([[1.0, 1.0], [0.0, 2.0]])
    q = QuadraticProblem(H, e, np.array([0.25, 0.75]))
    x = np.array([1.0, 2.0])
    f1 = 0.5 * (2 * 1 + 4 * 4) - 3.0      # 6
    f2 = 0.5 * (1 + 4) - 4.0              # -1.5
    assert q.loss(x) == pytest.approx(0.25 * f1 + 0.75 * f2)
    assert q.grad(x, 0) == pytest.approx([2 - 1, 8 - 1])
    assert q.grad(x, 1) == pytest.approx([1 - 0, 2 - 2])
    assert q.global_grad(x) == pytest.approx([0.25 * 1 + 0.75 * 1, 0.25 * 7 + 0.75 * 0])
    assert (q.num_clients, q.dim) == (2, 2)


def test_quadratic_grad_refuses_a_vector_of_another_dimension():
    q = QuadraticProblem(np.eye(3)[None], np.zeros((1, 3)), np.ones(1))
    with pytest.raises(ValueError, match=r"^x must be a vector of the problem's dimension 3, got shape \(2,\)$"):
        q.grad(np.zeros(2), 0)


def test_random_quadratic_defaults_are_the_documented_ones():
    # signature: seed=0, eig_range=(0.5, 2.0), spread=5.0, equal weights
    a = random_quadratic(3, 4)
    b = random_quadratic(3, 4, seed=0, eig_range=(0.5, 2.0), spread=5.0, p=[1 / 3] * 3)
    np.testing.assert_array_equal(a.H, b.H)
    np.testing.assert_array_equal(a.e, b.e)
    np.testing.assert_array_equal(a.p, b.p)
    eig = np.linalg.eigvalsh(a.H)
    assert eig.min() >= 0.5 - 1e-12 and eig.max() <= 2.0 + 1e-12
    assert eig.min() < 1.0 < eig.max()  # the range is really used, not a narrower one


def test_random_quadratic_of_one_client():
    q = random_quadratic(1, 2, seed=3)
    assert q.H.shape == (1, 2, 2) and q.p.tolist() == [1.0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_clients=0, dim=2), r"^num_clients must be an integer >= 1, got 0$"),
    (dict(num_clients=2, dim=0), r"^dim must be an integer >= 1, got 0$"),
    (dict(num_clients=2, dim=2, eig_range=(0.0, 1.0)), r"^eig_range\[0\] must be a finite number > 0, got 0\.0$"),
    (dict(num_clients=2, dim=2, eig_range=(2.0, 1.0)),
     r"^eig_range must be \(low, high\) with low <= high, got \(2\.0, 1\.0\)$"),
    (dict(num_clients=2, dim=2, spread=0.0), r"^spread must be a finite number > 0, got 0\.0$"),
])
def test_random_quadratic_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_quadratic(**kwargs)


def test_random_quadratic_eigenvalues_lie_in_eig_range_and_spread_scales_e():
    q = random_quadratic(4, 5, seed=1, eig_range=(1.0, 3.0))
    eig = np.linalg.eigvalsh(q.H)
    assert eig.min() >= 1.0 - 1e-12 and eig.max() <= 3.0 + 1e-12
    np.testing.assert_allclose(q.H, np.transpose(q.H, (0, 2, 1)), atol=0)
    same = random_quadratic(2, 3, seed=1, eig_range=(1.5, 1.5))  # low == high is allowed: H_i = 1.5 I
    np.testing.assert_allclose(same.H, np.broadcast_to(1.5 * np.eye(3), (2, 3, 3)), atol=1e-12)
    # e_i = H_i x_i* with x_i* = spread * z_i: the same draws, so e is linear in spread
    one, two = random_quadratic(3, 4, seed=2, spread=1.0), random_quadratic(3, 4, seed=2, spread=2.0)
    np.testing.assert_allclose(two.e, 2 * one.e, rtol=1e-12)
    np.testing.assert_array_equal(one.H, two.H)
    assert random_quadratic(1, 1).dim == 1


def test_random_quadratic_local_optima_are_normal_with_sd_spread():
    q = random_quadratic(50, 4, seed=0, spread=3.0)
    x_star = np.linalg.solve(q.H, q.e[..., None])[..., 0] / 3.0  # H_i x_i* = e_i; N(0, 1) after the scaling
    assert 0.85 < x_star.std() < 1.15 and abs(x_star.mean()) < 0.2
    assert np.abs(x_star).max() < 4.5  # 200 standard normal draws; 1 / z would put several far beyond


def _problem(*diagonals):
    H = np.array([np.diag(d) for d in diagonals], dtype=float)
    return QuadraticProblem(H, np.zeros(H.shape[:2]), np.full(len(diagonals), 1.0 / len(diagonals)))


def test_quadratic_problem_accepts_positive_semi_definite_h():
    _problem([0.0, 0.0], [1.0, 2.0])          # a zero H_i is PSD
    _problem([1.0, 0.0], [3.0, 3.0])          # singular PSD
    _problem([1e3, -1e-9], [1.0, 1.0])        # rounding-sized: -1e-9 >= -1e-10 * 1e3


@pytest.mark.parametrize("diagonals, message", [
    (([1.0, 1.0], [-1.0, 2.0]), r"^H: every H_i must be positive semi-definite; H_1 has the eigenvalue -1$"),
    (([1.0, -1.5e-10], [1.0, 1.0]),
     r"^H: every H_i must be positive semi-definite; H_0 has the eigenvalue -1\.5e-10$"),
])
def test_quadratic_problem_refuses_a_negative_eigenvalue(diagonals, message):
    with pytest.raises(ValueError, match=message):
        _problem(*diagonals)


def test_quadratic_problem_stores_float_arrays_of_list_inputs():
    q = QuadraticProblem([[[2, 0], [0, 1]]], [[1, 1]], [1])
    for arr in (q.H, q.e, q.p):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.float64
    assert q.loss(np.array([1.0, 1.0])) == pytest.approx(0.5 * 3 - 2)


# ------------------------------------------------------------------ cifar10.py: pure helpers
def test_run_seconds_prefers_seconds_per_run_then_divides_wall_time_by_runs_stacked():
    assert C.run_seconds({"summary": {"seconds_per_run": 12}}) == 12.0
    wall = {"provenance": {"wall_time_s": 100.0}}
    assert C.run_seconds({**wall, "config": {"engine": {"stacked_runs": 4}}}) == 25.0
    assert C.run_seconds({**wall, "summary": {"seconds_per_run": None}, "config": {"engine": {}}}) == 100.0
    assert C.run_seconds({**wall}) == 100.0
    assert C.run_seconds({"config": {"engine": {"stacked_runs": 2}}}) is None
    assert C.run_seconds({}) is None


def test_round_steps_scales_the_longest_client_to_steps():
    sizes = [320, 96, 32]                       # ceil(n / 32) = 10, 3, 1; E = 2 -> 20, 6, 2
    full = C._round_steps(sizes, 32, 2, None)
    assert full.tolist() == [20, 6, 2] and full.dtype == np.int64
    assert C._round_steps(sizes, 32, 2, 10).tolist() == [10, 3, 1]
    assert C._round_steps(sizes, 32, 2, 5).tolist() == [5, 2, 1]     # 1.5 -> 2 (to even), 0.5 -> 0 -> at least 1
    assert C._round_steps(sizes, 32, 3, 30).tolist() == [30, 9, 3]
    assert C._round_steps([50, 10], 16, 1, None).tolist() == [4, 1]


def test_trained_images_counts_last_partial_batches_by_their_real_size():
    sizes, B = [40, 10], 32                     # ceil(n / B) = 2, 1
    # round 1: tau = (4, 2): two full epochs each -> 80 + 20; round 2: tau = (3, 1): 40 + 32 (a full batch), 10
    history = [{"local_steps": [4, 2]}, {"local_steps": [3, 1]}]
    assert C.trained_images(history, sizes, B) == 100 + 82
    assert C.trained_images([{"local_steps": [1, 1]}], [40, 10], 8) == 8 + 8   # rest * B < n
    assert C.trained_images([], sizes, B) == 0
    assert C.trained_images([{"local_steps": [4]}], sizes, B) is None
    assert C.trained_images([{}], sizes, B) is None


def test_mean_epochs_and_round_work():
    assert C.mean_epochs("2") == 2.0 and C.mean_epochs("2-5") == 3.5
    assert C.round_work("2-5", 50000, 10000) == pytest.approx(3.5 * 50000 + 10000 / 3)
    assert C.round_work("2", 300, 30) == pytest.approx(610.0)


def test_mean_curves_by_hand():
    results = {
        "a": {0: {"history": [{"test_accuracy": 0.1, "train_loss": 2.0}, {"test_accuracy": 0.3, "train_loss": 1.0},
                              {"test_accuracy": 0.5, "train_loss": 0.5}]},
              1: {"history": [{"test_accuracy": 0.3, "train_loss": 4.0}, {"test_accuracy": 0.6, "train_loss": 3.0}]}},
        "b": {0: {"history": [{"test_accuracy": None}, {"test_accuracy": 0.4}]},
              2: {"history": [{"test_accuracy": 0.2}, {"test_accuracy": 0.8}]}},
        "empty": {0: {"history": []}},
    }
    out = C.mean_curves(results)
    assert sorted(out) == ["a", "b"]
    a = out["a"]
    assert a["round"].tolist() == [0, 1] and a["n_seeds"] == 2
    np.testing.assert_allclose(a["mean"], [0.2, 0.45])
    np.testing.assert_allclose(a["std"], [math.sqrt(2 * 0.1 ** 2), math.sqrt(2 * 0.15 ** 2)])  # ddof = 1
    b = out["b"]
    np.testing.assert_allclose(b["mean"], [0.2, 0.6])
    np.testing.assert_allclose(b["std"], [0.0, math.sqrt(2 * 0.2 ** 2)])   # one value in round 0: 0
    three = C.mean_curves({"c": {s: {"history": [{"test_accuracy": v}]} for s, v in enumerate([1.0, 2.0, 6.0])}})
    np.testing.assert_allclose(three["c"]["std"], [math.sqrt((4 + 1 + 9) / 2)])
    loss = C.mean_curves({"a": results["a"]}, key="train_loss")["a"]
    np.testing.assert_allclose(loss["mean"], [3.0, 2.0])


def test_load_data_defaults_neither_sample_nor_download(monkeypatch, tmp_path):
    import fedlib.data.cifar10 as D

    calls = []
    monkeypatch.setattr(D, "load_cifar10", lambda root, download=None: calls.append((root, download)) or "real")
    monkeypatch.setattr(D, "load_cifar10_sample", lambda: "sample")
    assert C.load_data(tmp_path) == "real" and calls == [(tmp_path, False)]
    assert C.load_data(tmp_path, download=True) == "real" and calls[-1] == (tmp_path, True)
    assert C.load_data(sample=True) == "sample"
    with pytest.raises(ValueError, match=r"^no CIFAR-10 location given: pass data_root \(the folder containing "
                                         r"cifar-10-batches-py\) or sample=True$"):
        C.load_data()


# ------------------------------------------------------------------ cifar10.py: chapter 5's demo
@pytest.fixture(scope="module")
def tiny_cifar():
    """The first 300 training / 20 test images of the shipped sample (Dir(0.1) still gives 16 clients >= 10)."""
    from fedlib.data.cifar10 import Cifar10Arrays

    d = C.load_data(sample=True)
    return Cifar10Arrays(d.train_images[:300], d.train_labels[:300], d.test_images[:20], d.test_labels[:20], "tiny")


def test_demo_run_defaults_fedavg_and_fednova_on_the_official_split(tiny_cifar):
    from fedlib.data.partition import dirichlet_partition
    from fedlib.schedules import RandomEpochs

    out = C.demo_run(width=0.03, rounds=1, data=tiny_cifar)
    # REFERENCE §4: 16 clients, Dir(0.1), numpy seed 2020
    sizes = [len(c) for c in dirichlet_partition(tiny_cifar.train_labels, 16, 0.1, 2020)]
    assert out["sizes"] == sizes and sum(sizes) == 300
    assert sorted(out) == ["fedavg", "fednova", "seconds", "sizes"] and out["seconds"] > 0
    fedavg, fednova = out["fedavg"], out["fednova"]
    assert len(fedavg) == len(fednova) == 1
    assert fedavg[0]["lr"] == fednova[0]["lr"] == 0.05           # default lr, no decay
    # default seed 0, E_i ~ U{2..5}: tau_i = E_i ceil(n_i / 32), one draw shared by both runs
    want = RandomEpochs(np.array(sizes), 32, 2, 5, seed=0).epochs_of(0) * -(-np.array(sizes) // 32)
    assert fedavg[0]["local_steps"] == fednova[0]["local_steps"] == want.tolist()
    # chi^2_{p||w}: FedNova's weights are p (0); FedAvg's tau-weighted ones are not, by eq. 4
    p = np.array(sizes) / 300
    w = p * want / (p * want).sum()
    assert fednova[0]["chi2"] == pytest.approx(0.0, abs=1e-12)
    assert fedavg[0]["chi2"] == pytest.approx(((p - w) ** 2 / w).sum())


def test_load_benchmarks_rows(tmp_path):
    import json
    from pathlib import Path

    src = json.loads((Path(__file__).resolve().parents[1] / "data/results/bench/cifar10_cpu_w003.json").read_text())
    assert "runs" not in src["config"]          # a file from before runs=N: one run
    src["provenance"]["git_commit"] = "0123456789abcdef0123456789abcdef01234567"
    (tmp_path / "cifar10_a.json").write_text(json.dumps(src))
    stacked = json.loads(json.dumps(src))
    stacked["config"]["runs"] = 3
    (tmp_path / "cifar10_b.json").write_text(json.dumps(stacked))
    (tmp_path / "cifar10_c.json").write_text(json.dumps({**src, "kind": "other"}))
    (tmp_path / "synthetic_a.json").write_text(json.dumps(src))
    rows = C.load_benchmarks(tmp_path)
    assert [r["file"] for r in rows] == ["cifar10_a.json", "cifar10_b.json"]
    assert [r["runs"] for r in rows] == [1, 3]
    assert rows[0]["commit"] == "0123456789"
    assert rows[0]["engine_images_per_s"] == src["summary"]["engine_images_per_s"] and rows[0]["variants"] == []


def test_format_benchmark_rows_by_hand():
    """Chapter 5's speed table: one row per benchmark file, in :data:`BENCHMARK_HEADERS`' order
    (the chapter transposes it); a failed ``--compare`` variant says so, no variant is ``—``."""
    base = {"device": "NVIDIA H200", "width": 1.0, "precision": "bf16", "cuda_graph": True, "runs": 4,
            "sequential_images_per_s": 6748.4, "engine_images_per_s": 77225.2, "ratio": 11.4434, "torch": "2.11.0",
            "commit": "d036d5dde2", "file": "a.json", "variants": []}
    compare = {**base, "cuda_graph": False, "file": "b.json",
               "variants": [{"variant": "conv=gemm", "gain": 1.2345, "error": None},
                            {"variant": "runs=8", "gain": None, "error": "out of memory"}]}
    rows = C.format_benchmark_rows([base, compare])
    assert rows[0] == ["NVIDIA H200", "1.0", "bf16", "yes", "4", "6,748", "77,225", "11.44×", "—", "2.11.0",
                       "d036d5dde2", "a.json"]
    assert rows[1][3] == "no" and rows[1][8] == "conv=gemm 1.234×, runs=8 failed"
    assert all(len(r) == len(C.BENCHMARK_HEADERS) for r in rows)


def test_chapter5_speed_table_of_the_committed_benchmarks(tmp_path):
    """The chapter transposes the table with fedlib.report (it did so inline, with a dict of
    lambdas in the cell); the Markdown is the one the inline code rendered."""
    import json
    from pathlib import Path

    from fedlib.report import transposed_markdown_table

    root = Path(__file__).resolve().parents[1]
    (source,) = ["".join(c["source"]) for c in json.loads((root / "book/05_cifar10_table1.ipynb").read_text())["cells"]
                 if "bench = C.load_benchmarks(bench_dir)" in "".join(c["source"])]
    assert "transposed_markdown_table(C.BENCHMARK_HEADERS, C.format_benchmark_rows(bench)" in source
    assert "lambda" not in source
    for name in ("cifar10_cpu_w003.json", "cifar10_h200_bf16_graph_r4.json"):  # later benchmarks add columns
        (tmp_path / name).write_bytes((root / "data/results/bench" / name).read_bytes())
    table = transposed_markdown_table(C.BENCHMARK_HEADERS, C.format_benchmark_rows(C.load_benchmarks(tmp_path)),
                                      spec="s")
    assert table.splitlines()[:9] == [
        "| device | cpu | NVIDIA H200 |", "|---|---|---|", "| width | 0.03 | 1.0 |", "| precision | fp32 | bf16 |",
        "| CUDA graph | no | yes |", "| runs stacked | 1 | 4 |", "| sequential loop (images/s) | 4,897 | 6,748 |",
        "| engine (images/s) | 9,915 | 77,225 |", "| ratio | 2.02× | 11.44× |"]
    assert table.splitlines()[9:] == [
        "| variants, same run (gain over the engine) | — | — |", "| torch | 2.14.1 | 2.11.0 |",
        "| commit | bf44de20b6 | d036d5dde2 |", "| file | cifar10_cpu_w003.json | cifar10_h200_bf16_graph_r4.json |"]


def test_demo_run_without_data_trains_on_the_shipped_sample(tiny_cifar, monkeypatch):
    calls = []
    monkeypatch.setattr(C, "load_data", lambda *a, **k: calls.append((a, k)) or tiny_cifar)
    out = C.demo_run(width=0.03, rounds=1, epochs="2", algorithms=("fednova",))
    assert calls == [((), {"sample": True})]
    assert sorted(out) == ["fednova", "seconds", "sizes"] and sum(out["sizes"]) == 300


def test_format_bench_by_hand():
    res = {"sequential_images_per_s": 1234.4, "engine_images_per_s": 5678.6, "ratio": 4.6004,
           "images_per_round": 960, "max_local_steps": 20, "prefix_efficiency": 0.625}
    head = ("sequential per-client loop:       1234 images/s\n"
            "stacked engine:                   5679 images/s\n"
            "ratio (engine / sequential): 4.60x   (1 run(s) stacked, 960 images per round per run, max tau 20, "
            "prefix efficiency 0.62)")
    assert C.format_bench(res) == head
    variants = [{"variant": "base", "engine_images_per_s": 7098.0, "gain": 1.25},
                {"variant": "eager", "engine_images_per_s": 4258.9, "gain": 0.75},   # |gain - 1| = spread: within
                {"variant": "runs=8", "engine_images_per_s": 8517.9, "gain": 1.5},
                {"variant": "cuda-graph", "error": "RuntimeError: no"}]
    within = " — within the base engine's own spread (±0.250): no measured change"
    assert C.format_bench({**res, "runs_stacked": 2, "variants": variants}) == (
        head.replace("(1 run(s)", "(2 run(s)")
        + "\nvariant base:       7098 images/s (1.250x the base engine, same call)"
        + "\nvariant eager:       4259 images/s (0.750x the base engine, same call)" + within
        + "\nvariant runs=8:       8518 images/s (1.500x the base engine, same call)"
        + "\nvariant cuda-graph: failed (RuntimeError: no)")
    # a failed base gives no spread to compare with
    failed_base = [{"variant": "base", "error": "E: x"}, {"variant": "eager", "engine_images_per_s": 10.0, "gain": 1.0}]
    assert C.format_bench({**res, "variants": failed_base}).endswith(
        "\nvariant base: failed (E: x)\nvariant eager:         10 images/s (1.000x the base engine, same call)")


BASE = dict(runs=4, precision="bf16", cuda_graph=True, path="grouped", cudnn_bench=False, cuda=True)
BASE_SETTINGS = {"runs": 4, "precision": "bf16", "cuda_graph": True, "channels_last": True, "cudnn_benchmark": False,
                 "conv": "cudnn"}


@pytest.mark.parametrize("text, change", [
    ("base", {}),
    ("runs=1", {"runs": 1}),
    ("runs=12", {"runs": 12}),
    ("precision=fp32", {"precision": "fp32"}),
    ("eager+runs=2", {"cuda_graph": False, "runs": 2}),
    ("conv=gemm+cudnn-benchmark", {"conv": "gemm", "cudnn_benchmark": True}),
    ("channels-first+precision=fp32", {"channels_last": False, "precision": "fp32"}),
])
def test_parse_bench_variant_settings(text, change):
    assert C.parse_bench_variant(text, **BASE) == {**BASE_SETTINGS, **change}


@pytest.mark.parametrize("text, kw, message", [
    ("runs=0", {}, r"^variant 'runs=0': runs=N needs a whole number N >= 1, got '0'$"),
    ("runs=", {}, r"^variant 'runs=': runs=N needs a whole number N >= 1, got ''$"),
    ("precision=fp64", {}, r"^variant 'precision=fp64': precision must be one of \('fp32', 'bf16'\), got 'fp64'$"),
    ("precision=bf16", {}, r"^variant 'precision=bf16': 'precision=bf16' is already the base engine's setting$"),
    ("cuda-graph", {"cuda_graph": False, "cuda": False}, r"^variant 'cuda-graph': CUDA graphs need a CUDA device$"),
    ("eager+eager", {}, r"^variant 'eager\+eager': changes cuda_graph twice$"),
    ("channels-first", {"path": "vmap"},
     r"^variant 'channels-first': channels-first is a setting of the grouped path, not 'vmap'$"),
    ("conv=gemm", {"path": "vmap"}, r"^variant 'conv=gemm': conv is a setting of the grouped path, not 'vmap'$"),
    ("conv=fft", {}, r"^variant 'conv=fft': conv must be one of \('cudnn', 'gemm'\), got 'fft'$"),
    ("conv=gemm+channels-first", {}, r"^variant 'conv=gemm\+channels-first': conv=gemm reads the weights in their "
                                     r"channels-last order; it cannot be combined with channels-first$"),
    ("   ", {}, r"^a variant must be a non-empty string, got '   '$"),
    (None, {}, r"^a variant must be a non-empty string, got None$"),
    ("fast", {}, r"^variant 'fast': unknown 'fast'; choose from base, cudnn-benchmark, "),
])
def test_parse_bench_variant_refusals(text, kw, message):
    with pytest.raises(ValueError, match=message):
        C.parse_bench_variant(text, **{**BASE, **kw})


def test_parse_bench_variant_eager_needs_no_cuda():
    assert C.parse_bench_variant("eager", **{**BASE, "cuda": False}) == {**BASE_SETTINGS, "cuda_graph": False}


def test_parse_bench_variants_lists():
    assert C.parse_bench_variants(["base", "runs=2"], **BASE) == [("base", BASE_SETTINGS),
                                                                 ("runs=2", {**BASE_SETTINGS, "runs": 2})]
    assert C.parse_bench_variants((), **BASE) == []
    with pytest.raises(ValueError, match=r"^compare lists a variant twice: \['eager', 'eager'\]$"):
        C.parse_bench_variants(["eager", "eager"], **BASE)
    with pytest.raises(ValueError, match=r"^compare must be a list of variants, got the string 'eager' "):
        C.parse_bench_variants("eager", **BASE)


# ------------------------------------------------------------------ cifar10.py: train_runs' checkpoints and stop
def _fedavg_run():
    from fedlib.algorithms import make_algorithm
    from fedlib.solvers import sgd

    return [{"algorithm": make_algorithm("fedavg", sgd(0.05, weight_decay=1e-4)), "epochs": "2", "seed": 0,
             "name": "a"}]


def _saved_round(path):
    from fedlib.checkpoint import load_checkpoint

    return load_checkpoint(path, kind="table1")["round"] if path.exists() else None


def test_train_runs_checkpoints_every_k_rounds_and_the_last_and_a_last_round_stop_is_no_stop(tiny_cifar, tmp_path):
    import time

    parts = C.official_partition(tiny_cifar.train_labels)
    ck = tmp_path / "group.ckpt"
    seen = []

    def callback(t, records, seconds):
        seen.append((t, _saved_round(ck), seconds))
        return t != 3  # "stop" after the last round: nothing was cut short

    start = time.perf_counter()
    res = C.train_runs(_fedavg_run(), tiny_cifar, parts, rounds=4, width=0.03, device="cpu", checkpoint=ck,
                       checkpoint_every=3, callback=callback)
    took = time.perf_counter() - start
    assert [(t, r) for t, r, _ in seen] == [(0, None), (1, None), (2, 3), (3, 4)]  # after round 3, then the last
    assert res["stopped"] is False and len(res["histories"][0]) == 4 and res["resumed_from"] == 0
    # the clocks: each round's time, the callback's running total and the call's total are parts of the call
    assert len(res["round_seconds"]) == 4 and all(s >= 0 for s in res["round_seconds"])
    assert sum(res["round_seconds"]) <= res["seconds"] <= took
    assert 0 <= seen[0][2] <= seen[1][2] <= seen[2][2] <= seen[3][2] <= res["seconds"]


def test_train_runs_default_checkpoint_every_round_and_no_save_on_stop(tiny_cifar, tmp_path):
    parts = C.official_partition(tiny_cifar.train_labels)
    ck = tmp_path / "every.ckpt"
    seen = []
    res = C.train_runs(_fedavg_run(), tiny_cifar, parts, rounds=3, width=0.03, device="cpu", checkpoint=ck,
                       callback=lambda t, rec, s: seen.append(_saved_round(ck)) or False)
    assert seen == [1] and res["stopped"] is True and len(res["histories"][0]) == 1
    never = tmp_path / "never.ckpt"
    res = C.train_runs(_fedavg_run(), tiny_cifar, parts, rounds=2, width=0.03, device="cpu", checkpoint=never,
                       checkpoint_every=0, callback=lambda t, rec, s: False)
    assert res["stopped"] is True and not never.exists()   # save_on_stop defaults to False
    on_stop = tmp_path / "on_stop.ckpt"
    res = C.train_runs(_fedavg_run(), tiny_cifar, parts, rounds=2, width=0.03, device="cpu", checkpoint=on_stop,
                       checkpoint_every=0, save_on_stop=True, callback=lambda t, rec, s: False)
    assert res["stopped"] is True and _saved_round(on_stop) == 1


# ----------------------------------------------------- quadratic.random_quadratic: the input checks' mutants
def test_random_quadratic_refuses_a_bytes_eig_range():
    """Mutants Q2 (the ``isinstance(eig_range, (str, bytes))`` test dropped) and Q7 (``(str, bytes)``
    -> ``str``): ``b"12"`` unpacks to the ints 49 and 50, which pass every later check, so it built a
    problem with eigenvalues in [49, 50] without a word."""
    with pytest.raises(ValueError, match=r"^eig_range must be a pair \(low, high\) of eigenvalues > 0, got b'12'$"):
        random_quadratic(2, 2, eig_range=b"12")


def test_random_quadratic_names_a_str_eig_range_as_not_a_pair():
    """Mutant Q2: without the str test, ``"12"`` fails later as ``eig_range[0]`` not being a number,
    a message about the wrong thing (the argument is no pair at all)."""
    with pytest.raises(ValueError, match=r"^eig_range must be a pair \(low, high\) of eigenvalues > 0, got '12'$"):
        random_quadratic(2, 2, eig_range="12")

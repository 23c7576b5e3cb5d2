"""Items an earlier session noticed and left alone (2026-12-04, third batch): chapter 3's problem
seeds, flags a CIFAR-10 resume did not check, checkpoint memory, LEAF labels. Each test fails on
the code before its fix."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

from fedlib import checkpoint as ck
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- checkpoint memory
class _Pair(NamedTuple):
    a: object
    b: object


def _state():
    """Tensors and arrays of every layout save_checkpoint meets: contiguous, transposed, sliced,
    bfloat16, 0-d, one object twice, arrays larger than pickle's 64 KiB frames and smaller ones."""
    g = torch.Generator().manual_seed(3)
    big = torch.randn(300, 200, generator=g, dtype=torch.float64)
    shared = torch.randn(7, generator=g)
    arr = np.arange(40000, dtype=np.float32).reshape(200, 200)
    return {"params": {"w": big, "wt": big.T, "slice": big[::3, 1:], "bf": torch.randn(50, generator=g).bfloat16(),
                       "s0": torch.tensor(2.5), "i": torch.arange(12).reshape(3, 4)},
            "momentum": _Pair(shared, shared), "np": [arr, arr, np.asfortranarray(arr), arr[:, ::2], np.float64(1.5),
                                                      np.array(3)], "none": None}


def _old_bytes(**kw) -> bytes:
    """What the code before the streaming save wrote: ``pickle.dumps`` of the document (the state
    copied by ``to_numpy_tree``), then the footer."""
    round_done, seed = kw["round_done"], kw["seed"]
    doc = {"format": ck.FORMAT, "kind": kw.get("kind", "run"), "config": dict(kw["config"]), "round": round_done,
           "state": ck.to_numpy_tree(kw["state"]), "history": [dict(h) for h in kw["history"]],
           "initial": dict(kw.get("initial") or {}),
           "rng": {"seed": seed, "next_round": round_done,
                   "note": "all draws come from (seed, purpose, round, client) streams; nothing else carries state"},
           "extra": dict(kw.get("extra") or {})}
    blob = pickle.dumps(doc, protocol=4)
    return blob + ck.FOOTER + hashlib.sha256(blob).hexdigest().encode("ascii")


def test_streamed_checkpoint_is_byte_identical_to_the_old_format(tmp_path):
    kw = dict(config={"lr": 0.02, "nested": {"a": [1, 2]}}, round_done=4, state=_state(),
              history=[{"round": 1, "loss": 0.5}], initial={"loss": 2.0}, seed=7, extra={"tau": [2, 3]})
    path = ck.save_checkpoint(tmp_path / "c.ckpt", **kw)
    assert path.read_bytes() == _old_bytes(**kw)
    doc = ck.load_checkpoint(path)
    want = ck.to_numpy_tree(kw["state"])
    np.testing.assert_array_equal(doc["state"]["params"]["wt"], want["params"]["wt"])
    np.testing.assert_array_equal(doc["state"]["np"][3], want["np"][3])
    assert doc["state"]["np"][2].flags.c_contiguous  # copied in C order, as to_numpy_tree did
    # the state is not modified, and the saved arrays do not share memory with it
    doc["state"]["params"]["w"][0, 0] = 99.0
    assert float(kw["state"]["params"]["w"][0, 0]) != 99.0


def test_files_of_the_old_code_with_and_without_footer_still_load(tmp_path):
    kw = dict(config={"x": 1}, round_done=2, state={"w": torch.ones(70000)}, history=[], seed=0)
    blob = _old_bytes(**kw)
    with_footer, without = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    with_footer.write_bytes(blob)
    without.write_bytes(blob[:-(len(ck.FOOTER) + 64)])
    for p in (with_footer, without):
        assert ck.load_checkpoint(p)["state"]["w"].sum() == 70000.0
    bad = bytearray(blob)
    bad[len(blob) // 2] ^= 1  # inside the array's bytes: still unpickles, into another number
    with_footer.write_bytes(bytes(bad))
    with pytest.raises(ck.CheckpointError, match="SHA-256 does not match") as info:
        ck.load_checkpoint(with_footer)
    assert info.value.reason.startswith("corrupt: its SHA-256 footer does not match")


def test_a_failing_save_leaves_the_previous_checkpoint_and_no_temporary_file(tmp_path):
    path = ck.save_checkpoint(tmp_path / "c.ckpt", config={}, round_done=1, state={"w": np.ones(3)}, history=[])
    before = path.read_bytes()
    with pytest.raises(Exception):  # a lambda does not pickle
        ck.save_checkpoint(path, config={}, round_done=2, state={"w": np.ones(3)}, history=[],
                           extra={"f": lambda: 0})
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["c.ckpt"]


_PEAK_SCRIPT = textwrap.dedent("""
    import gc, json, os, sys
    import torch
    from fedlib.checkpoint import load_checkpoint, save_checkpoint

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def high_water_mark():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM back to the current resident size (Linux >= 4.0)

    def start():
        # the peak of this process's memory from here on: ru_maxrss is not that, since Linux folds the
        # peak of the image replaced by exec into it, and subprocess starts this script by vfork + exec
        # from the test process, so a pytest worker's own peak (GBs late in the suite) became "extra"
        # (10.8x in CI); VmHWM is the peak of this image only, and clear_refs resets it to now
        gc.collect()
        reset_peak()
        return rss()

    mode, path = sys.argv[1], sys.argv[2]
    try:
        reset_peak()
    except OSError as exc:
        print(json.dumps({"skip": f"cannot reset the peak resident size ({exc})"}))
        sys.exit(0)
    if mode == "save":
        g = torch.Generator().manual_seed(0)
        state = {"params": {f"w{k}": torch.randn(2 ** 21, generator=g) for k in range(12)}}  # 12 x 8 MiB
        before = start()
        save_checkpoint(path, config={"a": 1}, round_done=3, state=state, history=[], seed=0)
    else:
        before = start()
        doc = load_checkpoint(path)
    peak = high_water_mark()
    print(json.dumps({"extra": peak - before, "file": os.path.getsize(path)}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_save_and_load_hold_about_one_copy_of_the_file(tmp_path):
    """Peak resident memory over the resident memory before the call, in a fresh process
    (tracemalloc does not see torch's storage). The old code held about 3x the file while saving
    (a copy of the state, the pickle's bytes, and those bytes with the footer appended) and 2x
    while loading (the file's bytes, then the body sliced off for hashing, or the file and the
    arrays); now about 1x each: the pickler's bytes of the arrays while saving, the arrays while
    loading."""
    script, path = tmp_path / "peak.py", tmp_path / "peak.ckpt"
    script.write_text(_PEAK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ratios = {}
    for mode in ("save", "load"):
        out = subprocess.run([sys.executable, str(script), mode, str(path)], capture_output=True, text=True,
                             env=env, cwd=ROOT, check=True)
        got = json.loads(out.stdout)
        if "skip" in got:
            pytest.skip(got["skip"])
        assert got["file"] > 96 * 2 ** 20
        ratios[mode] = got["extra"] / got["file"]
    assert ratios["save"] < 1.5 and ratios["load"] < 1.5, ratios


# --------------------------------------------------------------------------- chapter 3's problems
def _chapter3_problem_seeds(monkeypatch, seed: int) -> list:
    """Execute chapter 3's code (ci profile, parameter ``seed``, two robustness problems, figures
    not saved) and return the ``seed`` of every ``random_quadratic`` it builds, in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import fedlib.plotting
    import fedlib.problems
    from IPython import display as ipy_display

    from fedlib.problems.quadratic import random_quadratic as real

    seeds: list = []

    def recording(*args, **kwargs):
        seeds.append(int(kwargs["seed"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(fedlib.problems, "random_quadratic", recording)
    monkeypatch.setattr(fedlib.plotting, "save_figure", lambda *a, **k: [])
    monkeypatch.setattr(ipy_display, "display", lambda *a, **k: None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    cells = json.loads((ROOT / "book" / "03_fedprox_tradeoff.ipynb").read_text())["cells"]
    namespace: dict = {}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        src = "".join(line for line in cell["source"] if not line.startswith("%"))
        exec(src, namespace)  # noqa: S102 - the repository's own chapter
        if "parameters" in cell["metadata"].get("tags", []):
            namespace.update(seed=seed, robustness_seeds=2)
    plt.close("all")
    return seeds


def test_chapter3_draws_each_problem_from_its_own_stream(monkeypatch):
    """The probe problem (16 clients, d = 5, the CIFAR-10 p_i) and the trade-off problem
    (m clients, d) are different instances; they were both built from the chapter's ``seed``, so
    client i of both drew from the same stream (their first draws equal), and the robustness
    problems used seeds seed+1, ..., so chapter seed 1's problem was chapter seed 0's first
    robustness problem. Now every problem is an instance of its own (Q.instance_seed): within one
    execution and across chapter seeds 0 and 1, no two problems share a seed."""
    runs = {s: _chapter3_problem_seeds(monkeypatch, s) for s in (0, 1)}
    distinct = {s: set(v) for s, v in runs.items()}
    assert all(len(d) == 1 + 1 + 2 for d in distinct.values()), runs  # probe, problem, 2 robustness problems
    assert not distinct[0] & distinct[1], runs


# --------------------------------------------------------------------------- table1: cuDNN search, CUDA graphs
def _table1_args(results, *extra):
    return ["table1", "--results", str(results), "--sample", "--width", "0.03", "--rounds", "2", "--device", "cpu",
            "--seeds", "0", "--cells", "sgd-e2-fedavg", "--budget-seconds", "600", *extra]


def _interrupted_after_first_checkpoint(monkeypatch, args) -> Path:
    """Run ``table1`` until its first checkpoint is written, then Ctrl-C (exit 130); the checkpoint."""
    import fedlib.checkpoint
    from cliutil import cli_exit

    real_save = fedlib.checkpoint.save_checkpoint

    def save_then_interrupt(*a, **kw):
        real_save(*a, **kw)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(fedlib.checkpoint, "save_checkpoint", save_then_interrupt)
        assert cli_exit(args)[0] == 130
    ckpt = Path(args[args.index("--results") + 1]) / ".ckpt__sgd-e2-fedavg__seed0.pkl"
    assert ckpt.is_file()
    return ckpt


def _rewrite(ckpt: Path, edit) -> None:
    doc = ck.load_checkpoint(ckpt)
    edit(doc)
    ck.save_checkpoint(ckpt, config=doc["config"], round_done=doc["round"], state=doc["state"], history=doc["history"],
                       initial=doc["initial"], seed=doc["rng"]["seed"], kind=doc["kind"], extra=doc["extra"])


def test_a_group_paused_under_cudnn_search_resumes_only_under_it(tmp_path, monkeypatch):
    """--cudnn-benchmark lets cuDNN pick other convolution algorithms, which round differently, as
    --conv does (refused): a group checkpointed with it was resumed without it (and the other way
    round), and its result said cudnn_benchmark of the last call only. Now refused like --conv,
    the checkpoint kept; with the flag it resumes. A checkpoint of an earlier commit (no such key)
    is not checked for it."""
    import torch
    from cliutil import cli_exit

    from fedlib.results import read_result

    ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(tmp_path, "--cudnn-benchmark"))
    assert ck.load_checkpoint(ckpt)["config"]["cudnn_benchmark"] is True
    before = ckpt.read_bytes()
    rc, out, err = cli_exit(_table1_args(tmp_path))
    assert rc == 2 and "cudnn_benchmark (checkpoint True, now False)" in err, (rc, out, err)
    assert ckpt.read_bytes() == before and not (tmp_path / "sgd-e2-fedavg__seed0.json").exists()
    assert torch.backends.cudnn.benchmark is False  # restored after the refused call
    rc, out, err = cli_exit(_table1_args(tmp_path, "--cudnn-benchmark"))
    assert rc == 0, err
    res = read_result(tmp_path / "sgd-e2-fedavg__seed0.json")
    assert res["summary"]["resumed_after_round"] == 1 and res["config"]["engine"]["cudnn_benchmark"] is True
    # a checkpoint written before the key existed resumes under either setting
    other = tmp_path / "other"
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(other, "--cudnn-benchmark"))
    _rewrite(ckpt, lambda doc: doc["config"].pop("cudnn_benchmark"))
    assert cli_exit(_table1_args(other))[0] == 0 and not ckpt.exists()


def test_a_group_resumed_with_cuda_graphs_switched_says_so(tmp_path, monkeypatch):
    """CUDA graphs replay the eager step's kernels, and gpu_run.sh switches a session to eager when
    they fail, so a group may resume with them switched (not refused); but its result said nothing
    (config.engine.cuda_graph was the last call's) and its mixed rate set later estimates. Every call
    is now recorded with its cuda_graph and the rounds it trained; a switch is flagged in
    provenance.resumed, and _previous_rate leaves such a result out. (A call with graphs needs a
    GPU: here the checkpoint's record of the first call says it had them.)"""
    from cliutil import cli_exit

    from fedlib.experiments import cifar10 as C
    from fedlib.results import read_result

    key = {"width": 0.03, "precision": "fp32", "path": "grouped", "cuda_graph": False, "device_type": "cpu",
           "num_train": None}
    for switched in (False, True):
        results = tmp_path / str(switched)
        ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(results))
        calls = ck.load_checkpoint(ckpt)["extra"]["calls"]
        assert [(c["cuda_graph"], c["rounds"]) for c in calls] == [(False, [0, 1])] and calls[0]["command"]
        if switched:
            _rewrite(ckpt, lambda doc: doc["extra"]["calls"][0].update(cuda_graph=True))
        rc, out, err = cli_exit(_table1_args(results))
        assert rc == 0, err
        res = read_result(results / "sgd-e2-fedavg__seed0.json")
        resumed = res["provenance"]["resumed"]
        assert [(c["cuda_graph"], c["rounds"]) for c in resumed["earlier_calls"]] == [(switched, [0, 1])]
        assert resumed.get("cuda_graph_changed", False) is switched
        assert ("CUDA graphs on in an earlier call" in out) is switched
        key["num_train"] = res["config"]["engine"]["num_train"]
        assert (C._previous_rate(results, key) is None) is switched


# --------------------------------------------------------------------------- LEAF: an inferred class count
def _leaf_file(folder: Path, labels_b) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"users": ["a", "b"], "num_samples": [2, len(labels_b)],
           "user_data": {"a": {"x": [[0.0, 1.0], [1.0, 0.0]], "y": [0, 1]},
                         "b": {"x": [[0.5, 0.5]] * len(labels_b), "y": list(labels_b)}}}
    path = folder / "d.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("label", [10**6, 10**9, 2**62 - 1])
def test_an_id_for_a_label_is_refused_where_the_class_count_is_inferred(tmp_path, label):
    """num_classes is the largest label plus one when not given: a label like 10**9 (an id, not a
    class number) made a data set of 10**9 + 1 classes, and 2**62 - 1 one of 2**62 classes, which
    failed only in the first model (python -m fedlib run synthetic --data, under ulimit -v 6000000:
    "out of memory (... shape (2, 1000000001) ...) the flags ask for more than this machine holds",
    and numpy's "array is too big" for 2**62 - 1, naming neither the label nor the file). Refused
    at load time now, naming the label, above 1,000,000 classes (the
    bound of dirichlet_partition); with num_classes given it loads."""
    from cliutil import cli_exit

    from fedlib.data import load_leaf

    path = _leaf_file(tmp_path, [1, label])
    want = (f"{path}: user 'b' y[1] = {label} would make num_classes {label + 1} (the largest label plus one; a "
            "model has one output per class), more than the 1000000 inferred at most: labels must be class numbers "
            "0..K-1, not ids; renumber them, or give num_classes")
    with pytest.raises(ValueError) as info:
        load_leaf(path)
    assert str(info.value) == want
    rc, out, err = cli_exit(["run", "synthetic", "--data", str(path), "--rounds", "1", "--quiet"])
    assert rc == 2 and err.rstrip().endswith("error: --data: " + want), err
    assert load_leaf(path, num_classes=label + 1).num_classes == label + 1


def test_the_largest_inferred_class_count_is_one_million(tmp_path):
    from fedlib.data import load_leaf

    assert load_leaf(_leaf_file(tmp_path, [1, 10**6 - 1])).num_classes == 10**6


# --------------------------------------------------------------------------- one-hot labels
def test_one_hot_labels_take_no_identity_matrix():
    """The stacked logistic gradient and the batched engine built one-hot labels as
    ``np.eye(C)[y]``: a C x C temporary (800 MB at 10,000 classes, 74.5 GiB at 100,001: the out of
    memory of ``run synthetic`` on LEAF labels up to 10**5). Now ``y.size x C``: the same array."""
    import tracemalloc

    from fedlib.problems.logistic import _one_hot

    y = np.array([[0, 2999, 5], [7, 7, 1]])
    np.testing.assert_array_equal(_one_hot(y, 3000), np.eye(3000)[y])
    assert _one_hot(y, 3000).dtype == np.float64
    tracemalloc.start()
    try:
        _one_hot(y, 3000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * y.size * 3000 * 8, peak  # np.eye(3000) alone is 72 MB


def test_the_engines_build_one_hot_labels_in_sample_memory(monkeypatch):
    """Neither the stacked gradient nor the batched engine calls np.eye with the class count."""
    import fedlib.engines.batched as batched
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    C = 5000
    ds = synthetic(1.0, 1.0, num_clients=2, seed=0, num_samples=[6, 8], num_classes=10)
    ds = type(ds)(ds.train_x, ds.train_y, ds.test_x, ds.test_y, num_classes=C, name="wide")
    prob = LogisticProblem(ds, l2=0.0)
    real_eye, sizes = np.eye, []

    def eye(n, *a, **k):
        sizes.append(n)
        return real_eye(n, *a, **k)

    monkeypatch.setattr(np, "eye", eye)
    x0 = prob.model.init_params()
    params = {k: np.stack([v, v]) for k, v in x0.items()}
    prob.model.loss_and_grad_stacked(params, np.stack([ds.train_x[0][:4]] * 2), np.stack([ds.train_y[0][:4]] * 2))
    batched.run_batched(make_algorithm("fedavg", sgd(0.1)), prob, FixedSteps([2, 2]), rounds=1, batch_size=4, seed=0,
                        evaluate=False)
    assert C not in sizes, sizes

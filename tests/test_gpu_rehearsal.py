"""The next GPU session's Table 1 calls (data/results/bench/NOTES.md, "Next session"),
rehearsed on the CPU beyond what tests/test_gpu_script*.py run: call 3's plan on the
committed results with the H200's engine settings (the pair starts stacked, at the estimate
NOTES.md states), and step 6's book build once call 5's ``bench --compare`` file (an H200
bench with CUDA graphs, 4 runs) is filed next to the committed H200 benchmark."""
from __future__ import annotations

import copy
import json
import shutil
import types

import numpy as np
from gpu_script import ROOT

from fedlib.experiments import cifar10 as C

PAIR = ["momentum-u25-fedavg", "momentum-u25-fednova"]


class _Started(Exception):
    pass


def _plan_call3(tmp_path, monkeypatch, budget, later):
    """run_table1 as call 3 calls it on the H200 (RESULTS seeded from data/results/cifar10, width 1,
    bf16, CUDA graphs, stack 2, the full split), stopped where the first group would train: its
    log lines and the runs of that group (``None`` if nothing starts)."""
    from fedlib.data.cifar10 import load_cifar10_labels

    results = tmp_path / "table1"
    results.mkdir()
    for f in (ROOT / "data/results/cifar10").glob("*__seed*.json"):
        shutil.copy(f, results)
    train, test = load_cifar10_labels()
    data = types.SimpleNamespace(train_labels=train, test_labels=test)

    def started(runs, *args, **kwargs):
        raise _Started([r["name"] for r in runs])

    monkeypatch.setattr(C, "resolve_device", lambda device: "cuda")
    monkeypatch.setattr(C, "train_runs", started)
    lines = []
    try:
        C.run_table1(results, budget_seconds=budget, seeds=[0], cells=PAIR, data=data, width=1.0, rounds=100,
                     device="cuda", precision="bf16", cuda_graph=True, stack=2, checkpoint_every=0,
                     continue_later=later, log=lines.append)
    except _Started as exc:
        return lines, exc.args[0]
    return lines, None


def test_call3_starts_the_pair_stacked_at_the_estimate_of_the_notes(tmp_path, monkeypatch):
    """The six committed seed-0 results are seeded, not planned (other cells): the new checks do
    not refuse them, and their rate (2 runs stacked) sizes the pair: 497 s, x1.15 = 572 s."""
    lines, group = _plan_call3(tmp_path, monkeypatch, budget=500, later=150)
    assert group == [f"{c}__seed0" for c in PAIR], lines
    assert "estimate: 71734 images/s from earlier results with the same engine settings" in lines
    assert any(line.startswith("training 2 run(s) stacked (estimate 497 s)") for line in lines), lines
    # with less than ~72 s of CONTINUE_LATER_SECONDS (B < ~722 at call 3) the pair does not fit stacked:
    # FedAvg's cell would train alone and FedNova's would not fit in call 4
    (tmp_path / "b").mkdir()
    lines, group = _plan_call3(tmp_path / "b", monkeypatch, budget=500, later=60)
    assert group == ["momentum-u25-fedavg__seed0"], lines


def _bench_cell_source() -> str:
    nb = json.loads((ROOT / "book/05_cifar10_table1.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
             and "bench = C.load_benchmarks(bench_dir)" in "".join(c["source"])]
    assert len(cells) == 1
    return cells[0]


def test_book_bench_cell_takes_the_h200_compare_bench_of_call5(tmp_path):
    """Call 5 files ``cifar10_h200_bf16_graph_r4_compare.json`` (CUDA graphs, the base engine at 4 runs,
    with its variants); chapter 5's benchmark cell must still pass (``PROFILE=full make book`` in
    step 6): it asserted that the H200 benches with CUDA graphs are exactly one, of 4 runs."""
    bench_dir = tmp_path / "bench"
    shutil.copytree(ROOT / "data/results/bench", bench_dir)
    doc = json.loads((bench_dir / "cifar10_h200_bf16_graph_r4.json").read_text())
    compare = copy.deepcopy(doc)
    compare["config"]["compare"] = ["base", "conv=gemm", "runs=8"]
    base = compare["summary"]["engine_images_per_s"]
    compare["summary"]["variants"] = [
        {"variant": name, "settings": {"runs": runs}, "engine_seconds": 1.0, "engine_images_per_s": base * gain,
         "gain": gain} for name, runs, gain in (("base", 4, 0.99), ("conv=gemm", 4, 1.2), ("runs=8", 8, 1.1))]
    (bench_dir / "cifar10_h200_bf16_graph_r4_compare.json").write_text(json.dumps(compare))
    from fedlib.report import markdown_table, transposed_markdown_table

    namespace = {"C": C, "np": np, "bench_dir": str(bench_dir), "results": {}, "markdown_table": markdown_table,
                 "transposed_markdown_table": transposed_markdown_table,
                 "display": lambda *a: None, "Markdown": lambda text: text}
    exec(_bench_cell_source(), namespace)  # noqa: S102 — the chapter's own cell
    assert len(namespace["bench"]) == 3

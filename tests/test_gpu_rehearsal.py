"""The next GPU session's calls (data/results/bench/NOTES.md, "Next session"), rehearsed on the CPU beyond
what tests/test_gpu_script*.py run: the ``gpu_run.sh`` command lines of the plan, read from NOTES.md as written,
run with stubs on a virtual clock (the limits each step gets, typical and worst case, and the settings pass the
script's checks); call 3's plan on the committed results with the H200's engine settings (the pair starts
stacked, at the estimate NOTES.md states), at the budget the script gives it; and step 6's book build once call
5's ``bench --compare`` file (an H200 bench with CUDA graphs, 4 runs) is filed next to the committed H200
benchmark."""
from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import types

import numpy as np
import pytest
from gpu_script import ROOT, stub_timeouts, write_clock_stubs

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
    not refuse them, and their rate (2 runs stacked) sizes the pair: 497 s, x1.15 = 572 s. Call 3's table1
    gets --budget-seconds 509 (test_the_plans_table1_calls_as_the_script_runs_them), ~508 s when it decides."""
    lines, group = _plan_call3(tmp_path, monkeypatch, budget=508, later=150)
    assert group == [f"{c}__seed0" for c in PAIR], lines
    assert "estimate: 71734 images/s from earlier results with the same engine settings" in lines
    assert any(line.startswith("training 2 run(s) stacked (estimate 497 s)") for line in lines), lines
    # with less than ~64 s of CONTINUE_LATER_SECONDS (B < ~714 at call 3) the pair does not fit stacked:
    # FedAvg's cell would train alone and FedNova's would not fit in call 4
    (tmp_path / "b").mkdir()
    lines, group = _plan_call3(tmp_path / "b", monkeypatch, budget=508, later=60)
    assert group == ["momentum-u25-fedavg__seed0"], lines


# ---------------------------------------------------------------- the plan's gpu_run.sh calls, on a virtual clock
SHA = "0123456789abcdef0123456789abcdef01234567"


def _plan_calls():
    """The ``gpu_run.sh`` command lines of NOTES.md's "Next session" section, in order (calls 1, 3 and 5)."""
    text = (ROOT / "data/results/bench/NOTES.md").read_text()
    section = text.split("### Next session", 1)[1].split("\n## ", 1)[0]
    inside = section.split("`")[1::2]  # what lies between a pair of backquotes
    spans = [" ".join(s.split()) for s in inside if "bash scripts/gpu_run.sh" in s]
    assert len(spans) == 3, spans
    return spans


def _substitute(span, **values):
    """The span with its placeholders filled in: ``<sha>``, and ``<NAME ± N>`` from ``values`` (a placeholder
    the test does not know fails: the plan changed, and this rehearsal must follow it)."""
    def fill(m):
        inner = m.group(1).strip()
        if inner == "sha":
            return SHA
        found = re.fullmatch(r"(\w+) ([−+-]) (\d+)", inner)
        assert found and found.group(1) in values, f"a placeholder this rehearsal does not know: <{inner}>"
        sign = 1 if found.group(2) == "+" else -1
        return str(values[found.group(1)] + sign * int(found.group(3)))
    return re.sub(r"<([^>]*)>", fill, span)


def _parse(span):
    """(settings, DATA_ROOT, BUDGET) of the span's ``NAME=VALUE ... bash scripts/gpu_run.sh OUT DATA BUDGET``
    (what comes before ``&&``, the unpack, is left out)."""
    words = shlex.split(span.split("&&")[-1])
    at = words.index("bash")
    settings = dict(w.split("=", 1) for w in words[:at])
    assert words[at + 1] == "scripts/gpu_run.sh" and len(words) == at + 5, words
    return settings, words[at + 3], int(words[at + 4])


#: ``date +%s`` is the real clock plus the seconds in $CLOCK (the other stubs: tests/gpu_script.py's
#: write_clock_stubs; ``timeout`` counts its seconds from $START_FILE's)
_DATE = ('#!/bin/bash\nif [ "$*" = +%s ]; then echo $(( $(REAL_DATE +%s) + $(cat "$CLOCK") )); '
         'else exec REAL_DATE "$@"; fi\n')


def _rehearse(tmp, span_settings, data, budget, steps=""):
    """Run ``gpu_run.sh`` with the plan's settings (RESULTS moved under ``tmp``) on the stubs' virtual clock;
    (exit status, log, [(virtual second, limit, command)], virtual seconds at the end)."""
    tmp.mkdir(parents=True)
    stubs = write_clock_stubs(tmp / "stubs", _DATE)
    (tmp / "clock").write_text("0\n")
    (tmp / "start").write_text(subprocess.run(["date", "+%s"], capture_output=True, text=True).stdout)
    if data == "/tmp/data":
        data = str(tmp / "data")
        (tmp / "data").mkdir()
    settings = dict(span_settings)
    if "RESULTS" in settings:
        settings["RESULTS"] = str(tmp / "table1")
    env = {k: v for k, v in os.environ.items() if not re.match(r"(SKIP_|BENCH_|TABLE1_|CONTINUE_|CUDA_)", k)}
    env.update(settings, PATH=f"{stubs}{os.pathsep}{env['PATH']}", PYTHON=str(stubs / "python"),
               CLOCK=str(tmp / "clock"), START_FILE=str(tmp / "start"), STUB_TIMEOUTS=str(tmp / "timeouts.txt"),
               STUB_STEPS=steps)
    env.pop("DEVICE", None)  # the plan's calls run on the GPU: DEVICE's default, cuda
    proc = subprocess.run(["bash", str(ROOT / "scripts/gpu_run.sh"), str(tmp / "out"), data, str(budget)],
                          env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    limits = [(at, limit, " ".join(command)) for at, _, limit, command in stub_timeouts(tmp / "timeouts.txt")]
    end = int((tmp / "clock").read_text()) + int(subprocess.run(["date", "+%s"], capture_output=True,
                                                                text=True).stdout) - int((tmp / "start").read_text())
    return proc.returncode, proc.stdout + proc.stderr, limits, end


def _limit(limits, pattern):
    found = [limit for _, limit, command in limits if re.search(pattern, command)]
    assert len(found) == 1, (pattern, limits)
    return found[0]


#: the GPU check as measured on 2026-11-30 (nvidia-smi + torch's check: +4 to +8 s; +8 s in a session's first
#: call) and pytest's import
GPU_CHECK = "*nvidia-smi*=1;*import torch*=7;*import pytest*=1"


@pytest.mark.parametrize("case, tests", [("typical", "*test_stacked_engine*=25;*test_optim*=8"),
                                         ("worst", "*test_stacked_engine*=hang;*test_optim*=hang")])
def test_call1_gives_both_test_steps_their_full_limits(tmp_path, case, tests):
    """Call 1 (CUDA tests and ClientOptimizer's) as NOTES.md writes it: each step's limit is capped at what is left
    of the budget less 10 s, so the budget must hold the GPU check, the CUDA tests to their limit and the 5-s kill
    grace, and ClientOptimizer's 30 s plus 10: with the 100 s it had, ClientOptimizer's limit was cut to 16 s when
    the CUDA tests ran to theirs. The call ends within its budget either way."""
    settings, data, budget = _parse(_substitute(_plan_calls()[0]))
    assert settings.get("SKIP_TABLE1") == "1" and settings.get("SKIP_BENCH") == "1", settings
    status, log, limits, end = _rehearse(tmp_path / case, settings, data, budget, f"{GPU_CHECK};{tests}")
    assert status == 0, log
    assert _limit(limits, r"test_stacked_engine") == int(settings["CUDA_TESTS_LIMIT"]), (limits, log)
    assert _limit(limits, r"test_optim") == 30, (limits, log)
    assert end <= budget, (end, limits, log)


def _table1_args(limits):
    found = [command for _, _, command in limits if " table1 " in f" {command} "]
    assert len(found) == 1, limits
    words = found[0].split()
    return {flag: words[words.index(flag) + 1] for flag in ("--budget-seconds", "--continue-later", "--stack")}


@pytest.mark.parametrize("B", [800, 715])
def test_the_plans_table1_calls_as_the_script_runs_them(tmp_path, monkeypatch, B):
    """Calls 3 and 4 as NOTES.md writes them, at B (``budget_left_s`` before call 3) of the plan (~800) and at the
    least it says the pair needs stacked (~715): no torch check (table1 is their only Python step), call 3's table1
    gets 555 − nvidia-smi's second − 45 s and CONTINUE_LATER_SECONDS = B − 650, which call 4 (call 3 taken at its
    worst, ~570 s; timeout_s = budget_left_s − 10, budget = timeout − 12) really has; with those the pair starts
    stacked."""
    span = _substitute(_plan_calls()[1], B=B)
    settings, data, budget = _parse(span)
    assert budget == 555 and settings["CONTINUE_LATER_SECONDS"] == str(B - 650), span
    status, log, limits, _ = _rehearse(tmp_path / "call3", settings, data, budget, "*nvidia-smi*=1")
    assert status == 0, log
    assert not [c for _, _, c in limits if "import torch" in c] and "CUDA check left to table1" in log, log
    call3 = _table1_args(limits)
    assert 508 <= int(call3["--budget-seconds"]) <= 509 and call3["--continue-later"] == str(B - 650), call3
    assert _limit(limits, r" table1 ") == int(call3["--budget-seconds"]) + 35  # killed 10 s before the budget
    # call 4: the same without the unpack and without CONTINUE_LATER_SECONDS
    timeout = (B - 570) - 10
    call4_settings = {k: v for k, v in settings.items() if k != "CONTINUE_LATER_SECONDS"}
    status, log, limits, _ = _rehearse(tmp_path / "call4", call4_settings, data, timeout - 12, "*nvidia-smi*=1")
    assert status == 0, log
    call4 = _table1_args(limits)
    assert call4["--continue-later"] == "0" and int(call4["--budget-seconds"]) >= B - 650, (call4, log)
    # what call 3's table1 decides with them (a second of its own start before it decides)
    lines, group = _plan_call3(tmp_path, monkeypatch, budget=int(call3["--budget-seconds"]) - 1,
                               later=int(call3["--continue-later"]))
    assert group == [f"{c}__seed0" for c in PAIR], lines


@pytest.mark.parametrize("left", [120, 300])
def test_call5_compare_bench_within_its_budget(tmp_path, left):
    """Call 5 as NOTES.md writes it, from the least ``budget_left_s`` it allows (120) up: BENCH_LIMIT = timeout −
    15 passes the script's check (≥ 15), the compare bench gets it less the GPU check's seconds (torch's check runs:
    this call has a bench), and the call ends within its budget, timeout − 5."""
    timeout = left - 10
    settings, data, budget = _parse(_substitute(_plan_calls()[2], timeout=timeout))
    assert int(settings["BENCH_LIMIT"]) == timeout - 15 >= 15 and budget == timeout - 5, settings
    status, log, limits, end = _rehearse(tmp_path / "call5", settings, data, budget,
                                         "*nvidia-smi*=1;*import torch*=4;*--compare*=hang")
    assert status == 0, log
    # (a second less when the real clock turns a second while the script runs)
    assert 0 <= int(settings["BENCH_LIMIT"]) - 5 - _limit(limits, r"--compare") <= 1, (limits, log)
    assert end <= budget, (end, limits, log)


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

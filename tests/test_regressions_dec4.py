"""Regression hunt of Dec 4 (full-profile paths, scripts, GPU job): defects found and fixed.

Each test fails on the code before its fix.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec
from fedlib.experiments.custom import TensorEngine, reference_differences
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd

PARTS = [np.arange(0, 4), np.arange(4, 8)]


def _run(name: str, seed: int = 0) -> RunSpec:
    return RunSpec(make_algorithm("fednova", sgd(0.1)), PARTS, FixedSteps([1, 2]), seed=seed, name=name,
                   lr_at=lambda t: 0.1)


def _engine(runs):
    torch.manual_seed(0)
    return TensorEngine(nn.Linear(6, 3).double(), torch.randn(8, 6, dtype=torch.float64), torch.arange(8) % 3, runs,
                        rounds=1, batch_size=2, dropout=False, dtype=torch.float64)


def test_stacked_engine_refuses_two_runs_of_one_name():
    """Two runs named alike were accepted: their records, the checkpoint's run_names order check and results keyed
    by name (reference_differences) could not tell them apart (one silently replaced the other)."""
    with pytest.raises(ValueError, match=r"\['fednova'\] are given to more than one run"):
        _engine([_run("fednova", 0), _run("fednova", 1)])


def test_stacked_engine_still_takes_unnamed_and_distinct_runs():
    """The default empty name may repeat (scripts/measure_host_planning.py, train_runs without names)."""
    assert _engine([_run(""), _run("")]).num_runs == 2
    assert _engine([_run("a"), _run("b")]).num_runs == 2


def test_reference_differences_refuses_runs_without_distinct_names():
    """Keyed by run name: two unnamed runs gave one entry (the second run's difference replaced the first's)."""
    engine = _engine([_run("", 0), _run("", 1)])
    engine.train()
    torch.manual_seed(0)
    model = nn.Linear(6, 3).double()
    with pytest.raises(ValueError, match="distinct names"):
        reference_differences(model, {"engine": engine})


def test_demo_run_refuses_a_repeated_algorithm():
    """demo_run returns {algorithm: history}: ("fedavg", "fedavg") trained two runs and returned one history."""
    from fedlib.experiments.cifar10 import demo_run

    with pytest.raises(ValueError, match=r"\['fedavg'\] listed twice"):
        demo_run(width=0.03, rounds=1, algorithms=("fedavg", "fedavg"), data=object())


def _documented_table1_modes():
    """``python -m fedlib table1 ... --summary`` / ``--list-cells`` commands the Markdown docs quote (inline spans
    and ```bash lines), whitespace joined."""
    import re
    import shlex

    from gpu_script import ROOT

    out = []
    for path in [ROOT / "README.md", *sorted(ROOT.glob("book/*.md")), *sorted(ROOT.glob("data/**/*.md"))]:
        text = path.read_text()
        fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        spans = [line.split(" #", 1)[0] for block in fenced for line in block.replace("\\\n", " ").splitlines()]
        spans += re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for span in spans:
            if "fedlib table1" not in " ".join(span.split()):
                continue
            tokens = shlex.split(" ".join(span.split()))
            if "fedlib" in tokens and tokens[tokens.index("fedlib") + 1:][:1] == ["table1"] \
                    and {"--summary", "--list-cells"} & set(tokens):
                out.append(pytest.param(tokens[tokens.index("fedlib") + 1:],
                                        id=f"{path.relative_to(ROOT)}: {' '.join(tokens)}"))
    return out


@pytest.mark.parametrize("argv", _documented_table1_modes())
def test_the_documented_table1_modes_run(argv, monkeypatch):
    """data/results/cifar10/README.md listed the cells with `table1 --budget-seconds 0 --list-cells`, which
    --list-cells refuses since it takes no other flag (exit 2); the docs' --summary / --list-cells commands run."""
    from cliutil import cli_exit
    from gpu_script import ROOT

    monkeypatch.chdir(ROOT)
    rc, out, err = cli_exit(argv)
    assert rc in (0, None), err
    assert out.strip()


def test_the_docs_quote_table1_modes():
    assert any("--list-cells" in p.values[0] for p in _documented_table1_modes())

"""The front pages (README.md, the ``fedlib`` module docstring) against the changes of 2026-12-04 after efe3bcd
(helper A's truth audit): resuming your own ``ClientOptimizer`` loop (``fedlib.checkpoint.to_torch_tree``),
``make_solver``'s refusals, ``run_sequential(initial_state=...)``, ``aggregate`` of a dict, global hooks.
Each test fails on the pages before the audit."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import fedlib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _architecture_row(first_cell: str) -> str:
    section = README.split("## Architecture", 1)[1].split("\nScripts:", 1)[0]
    return next(line for line in section.splitlines() if line.startswith(f"| {first_cell}"))


def _python_blocks() -> list:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def _own_loop_paragraph() -> str:
    return README.split("Your own training loop", 1)[1].split("Your own local solver", 1)[0]


def test_the_readme_resume_example_ends_where_an_unbroken_loop_does(tmp_path, monkeypatch):
    """The README told a user of their own loop nothing about resuming it; the state load_checkpoint returns is
    numpy, which ClientOptimizer and the server optimizer refuse. The example now resumes through to_torch_tree
    and, with server momentum whose buffer is not zero, ends bit for bit where the unbroken round does."""
    blocks = [b for b in _python_blocks() if "to_torch_tree(" in b]
    assert len(blocks) == 1, "the README has no example that resumes an own loop with to_torch_tree"
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "readme"}
    exec(compile(blocks[0], "README.md", "exec"), ns)
    unbroken, resumed, saved = ns["unbroken"], ns["resumed"], ns["saved"]
    assert isinstance(saved.params[0], np.ndarray)                      # what load_checkpoint gives back
    assert any(bool(b.abs().sum() > 0) for b in resumed.server.buffer)  # server momentum carried over
    for a, b in zip(unbroken.params, resumed.params):
        assert torch.equal(a, b)
    for a, b in zip(unbroken.server.buffer, resumed.server.buffer):
        assert torch.equal(a, b)
    # without to_torch_tree the saved state is refused, naming the way back
    with pytest.raises(ValueError, match=r"to_torch_tree"):
        ns["one_round"](saved)


def test_the_own_loop_paragraph_and_the_checkpoint_row_name_to_torch_tree():
    own = _own_loop_paragraph()
    assert "to_torch_tree(state, like=parameters_of(model))" in own and "save_checkpoint" in own
    row = _architecture_row("`fedlib.distributed`, `fedlib.checkpoint`")
    for name in ("save_checkpoint", "load_checkpoint", "to_numpy_tree", "to_torch_tree"):
        assert f"`{name}`" in row, name
        assert name in fedlib.checkpoint.__all__


def test_the_module_docstring_says_how_to_resume_an_own_loop_and_names_global_hooks():
    import fedlib.checkpoint  # noqa: F401

    line = fedlib.__doc__.split("- :mod:`fedlib.optim`", 1)[1].split("\n- ", 1)[0]
    assert ":func:`fedlib.checkpoint.to_torch_tree`" in line
    model_and_data = fedlib.__doc__.split("**Model and data**", 1)[1]
    assert "register_module_*" in model_and_data and "after the engine is built" in model_and_data


def test_the_readme_says_what_make_solver_refuses():
    from fedlib.solvers import make_solver

    text = README.split("`fedlib.solvers.make_solver(", 1)[1].split("\n\n", 1)[0]
    assert "`make_solver`" in _architecture_row("`fedlib.solvers`")
    assert "momentum 0.9 unless given" in text and "refuses any `momentum`" in text
    assert make_solver("momentum", 0.1).momentum == 0.9 == make_solver("momentum-prox", 0.1, mu=0.1).momentum
    for name in ("sgd", "prox"):
        with pytest.raises(ValueError, match=r"^momentum: "):
            make_solver(name, 0.1, momentum=0.0, **({"mu": 0.1} if name == "prox" else {}))
    for name in ("sgd", "momentum"):
        with pytest.raises(ValueError, match=r"^mu: "):
            make_solver(name, 0.1, mu=0.5)


def _troubleshooting_message(input_start: str) -> str:
    table = README.split("## Troubleshooting", 1)[1]
    row = next((ln for ln in table.splitlines() if ln.startswith(f"| API: `{input_start}")), None)
    assert row is not None, f"no Troubleshooting row for {input_start}"
    message = re.search(r"`([^`]+)`", row.split(" | ", 1)[1]).group(1)
    return re.split(r"\.\.\.|\(\.\.\.\)", message)[0].strip()


def test_the_troubleshooting_rows_of_the_new_api_refusals():
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.rule import aggregate
    from fedlib.schedules import FixedSteps
    from fedlib.server import momentum
    from fedlib.solvers import make_solver, sgd

    with pytest.raises(ValueError) as err:
        make_solver("sgd", 0.1, momentum=0.9)
    assert str(err.value).startswith(_troubleshooting_message("make_solver("))

    problem = random_quadratic(num_clients=2, dim=3, seed=0)
    saved = run_sequential(make_algorithm("fednova", sgd(0.01), momentum(0.9)), np.zeros(3), problem.grad_fn(),
                           problem.p, FixedSteps([1, 2]), rounds=2).state
    with pytest.raises(ValueError) as err:
        run_sequential(make_algorithm("fednova", sgd(0.01)), None, problem.grad_fn(), problem.p,
                       FixedSteps([1, 2]), rounds=1, initial_state=saved)
    assert str(err.value).startswith(_troubleshooting_message("run_sequential(initial_state="))

    with pytest.raises(ValueError) as err:
        aggregate({0: np.ones(2), 1: np.zeros(2)}, [0.5, 0.5], [1, 2])
    assert str(err.value).startswith(_troubleshooting_message("aggregate({"))
    assert "(a dict of them is refused)" in README.split("`fedlib.rule.aggregate(", 1)[1].split("\n\n", 1)[0]

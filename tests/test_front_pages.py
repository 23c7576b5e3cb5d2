"""The front pages (README.md, book/intro.md, the ``fedlib`` module docstring) against the code: the
scripts and architecture rows, run_seeds, the report helpers, the engines' hooks, the distributed test's process
counts, what a resumed ``table1`` group must keep; then the README's examples and refusals: resuming your own
``ClientOptimizer`` loop (``fedlib.checkpoint.to_torch_tree``), ``make_solver``'s refusals,
``run_sequential(initial_state=...)``, ``aggregate`` of a dict, global hooks."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import fedlib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
INTRO = (ROOT / "book" / "intro.md").read_text()


def _architecture_row(first_cell: str) -> str:
    section = README.split("## Architecture", 1)[1].split("\nScripts:", 1)[0]
    return next(line for line in section.splitlines() if line.startswith(f"| {first_cell}"))


def test_the_readme_names_every_script():
    """scripts/measure_sampling_slopes.py and scripts/measure_bias_limit.py (chapter 8's numbers) were not named."""
    tracked = subprocess.run(["git", "ls-files", "scripts"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert len(tracked) >= 10
    scripts_paragraph = README.split("\nScripts:", 1)[1].split("\n\n", 1)[0]
    missing = [s for s in tracked if f"`{s}`" not in scripts_paragraph]
    assert not missing, f"the README's Scripts paragraph does not name {missing}"


def test_the_architecture_rows_name_the_experiments_and_report_helpers():
    """fedlib.experiments.run_seeds and fedlib.report's plus_minus / transposed_markdown_table were not named."""
    import fedlib.experiments
    import fedlib.report

    row = _architecture_row("`fedlib.experiments`")
    for name in fedlib.experiments.__all__:
        assert f"`{name}`" in row, name
    for name in set(fedlib.report.__all__) - {"fmt"}:  # fmt: the number format the tables use
        assert f"`{name}`" in row, name


def test_the_front_pages_say_what_the_stacked_engine_does_with_hooks():
    """Since 2f798d9 the grouped path refuses a model with any hook, both paths refuse backward hooks and the
    vmap path (train_clients' TensorEngine) runs forward hooks (tests/test_model_hooks.py checks the
    behaviour); the README's engines row, its custom-model sentence and the docstring said nothing."""
    engines = _architecture_row("`fedlib.engines`")
    assert "forward hooks run on the vmap path" in engines
    assert "refuses a model with any hook" in engines and "both refuse backward hooks" in engines
    custom = README.split("`fedlib.experiments.custom.train_clients`", 1)[1].split("`reference_differences", 1)[0]
    assert "forward hooks run" in custom and "backward hooks are refused" in custom
    doc = fedlib.__doc__.split("**Model and data**", 1)[1]
    assert "backward hooks" in doc and "on the grouped path any hook" in doc and "runs forward hooks" in doc


def test_the_docstrings_engines_line_names_every_engine():
    """The quadratic replica engine (run_replicas) was missing from the module list."""
    line = next(ln for ln in fedlib.__doc__.splitlines() if ln.startswith("- :mod:`fedlib.engines`"))
    for word in ("reference", "quadratic", "batched", "stacked"):
        assert word in line, (word, line)


def test_the_distributed_claim_is_what_the_test_runs():
    """README said 'tested with 1, 2 and 3 gloo processes': the test compares torchrun with 2 and 3 gloo
    processes against one plain process (no gloo)."""
    match = re.search(r"tested: (\d+) and (\d+) gloo processes against one process", README)
    assert match, "the README's distributed sentence changed: update this test"
    test = (ROOT / "tests" / "test_distributed.py").read_text()
    body = test.split("def test_one_two_three_processes_agree", 1)[1].split("\ndef ", 1)[0]
    counts = tuple(int(n) for n in re.search(r"for n in \(([\d, ]+)\):", body).group(1).split(","))
    assert counts == tuple(int(g) for g in match.groups())
    assert "main(FLAGS" in body  # the one process: the CLI in this process, no torchrun


def test_the_chapters_that_use_run_seeds_are_the_ones_the_readme_lists():
    from fedlib.experiments import run_seeds

    match = re.search(r"over several seeds \(([\d, ]+); chapter 5's engine check\) takes them from\s+"
                      r"`fedlib\.experiments\.run_seeds\(seed, n\)` = n·seed, …, n·seed \+ n − 1",
                      " ".join(README.split()))
    assert match, "the README's run_seeds sentence changed: update this test"
    listed = {int(n) for n in match.group(1).split(",")}
    using = set()
    for path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        if re.search(r"\brun_seeds\(", code):
            using.add(int(path.name[:2]))
    assert listed == using, (listed, using)
    assert "run_seeds(seed, len(algorithms))" in (ROOT / "fedlib" / "experiments" / "cifar10.py").read_text()
    assert run_seeds(0, 3) == (0, 1, 2) and run_seeds(2, 3) == (6, 7, 8)  # n·seed, ..., n·seed + n − 1
    assert "`fedlib.experiments.run_seeds(seed, n)`" in INTRO


def test_what_a_resumed_table1_group_must_keep_is_what_table1_help_says():
    """README listed 'cells, data and engine settings'; the checkpoint also keeps the rounds."""
    from fedlib.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices["table1"]
    helptext = " ".join(sub.format_help().split())
    said = re.search(r"only with the same ([\w ,]+) \(--width", helptext).group(1)
    readme = " ".join(README.split())
    assert f"under the same {said} (`--width`" in readme, said


# --------------------------------------------------------------------------- the README's examples and refusals
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
    assert "`momentum=0` given to the momentum solvers\nor `mu=0` to the proximal ones" in text
    for name, kwargs in (("momentum", {"momentum": 0.0}), ("momentum-prox", {"momentum": 0.0, "mu": 0.1})):
        with pytest.raises(ValueError, match=r"^momentum must be > 0"):
            make_solver(name, 0.1, **kwargs)
    for name, kwargs in (("prox", {}), ("momentum-prox", {"momentum": 0.5})):
        with pytest.raises(ValueError, match=r"^mu must be > 0"):
            make_solver(name, 0.1, mu=0.0, **kwargs)
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
        run_sequential(make_algorithm("fednova", sgd(0.01)), np.zeros(3), lambda x, i, t, k: None, problem.p,
                       FixedSteps([1, 2]), rounds=1)
    assert str(err.value).startswith(_troubleshooting_message("run_sequential` with a `grad_fn`"))

    with pytest.raises(ValueError) as err:
        aggregate({0: np.ones(2), 1: np.zeros(2)}, [0.5, 0.5], [1, 2])
    assert str(err.value).startswith(_troubleshooting_message("aggregate({"))
    assert "(a dict of them is refused)" in README.split("`fedlib.rule.aggregate(", 1)[1].split("\n\n", 1)[0]

"""The front pages (README.md, book/intro.md, the ``fedlib`` module docstring) against the code, after
the changes of 2026-12-04 (helper C's truth audit): run_seeds, the report helpers, the engines' hooks,
the scripts, the distributed test's process counts, what a resumed ``table1`` group must keep."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

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
    vmap path (train_clients' TensorEngine) runs forward hooks (tests/test_leftovers_dec4d.py checks the
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

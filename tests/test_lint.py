"""``ruff check`` finds nothing in the project's trees, with the selection of ``pyproject.toml``
(``[tool.ruff.lint]``: pyflakes, syntax errors, bugbear, pylint's errors; what it leaves out is said there):
an undefined name on some path, a closure that captures a loop variable late, a redefinition that
shadows, an unused import or variable. A finding fails the tree's test with ruff's report. Ruff is a
requirement of the ``test`` extra (pinned in constraints.txt): without it the tests fail, they do not skip.

Linting another tree is one entry in ``TREES``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# book: the chapters' notebooks (ruff lints their code cells) and book/_ext; book/_static is vendored
# (pyproject.toml's extend-exclude)
TREES = ["fedlib", "scripts", "book", "tests"]

SELECTION = {"F", "E9", "B", "PLE"}


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def ruff_version() -> str:
    found = _ruff("--version")
    if found.returncode != 0:
        why = (found.stderr.strip().splitlines() or [f"exit {found.returncode}"])[-1]
        pytest.fail(f"ruff is not installed for {sys.executable} (`python -m ruff`: {why}); "
                    "run `make env`, which installs the test extra at the pins of constraints.txt")
    return found.stdout.strip()


def test_the_selection_is_pyprojects():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the pinned environment's)
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert SELECTION <= set(lint["select"]), f"pyproject.toml's [tool.ruff.lint] select {lint['select']}"


@pytest.mark.parametrize("tree", TREES)
def test_ruff_finds_nothing(tree, ruff_version):
    assert (ROOT / tree).is_dir(), f"{tree}/ is not a directory of the repository"
    found = _ruff("check", "--no-cache", "--output-format", "concise", tree)
    assert found.returncode == 0, (f"{ruff_version} check {tree}/ (exit {found.returncode}): fix the findings, or "
                                   f"add a `# noqa: RULE` with the reason where the code is right as written\n"
                                   f"{found.stdout}{found.stderr}")

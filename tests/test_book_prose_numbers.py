"""The chapters' prose says only what their code measures.

A result belongs in a chapter's *output* (printed, tabulated, asserted), not typed into its
Markdown: typed, it stays the same when the code, the profile or the seed changes what the
chapter measures. The check here is deliberately narrow, so that it raises no false alarm:

* every decimal number in a chapter's Markdown cells (and in ``book/intro.md``) must also occur,
  as a literal, in that chapter's code cells — a parameter, a tolerance, an asserted value such
  as chapter 5's ``9.75`` M parameters — or be listed in ``QUOTED`` below with where it comes
  from (the paper's text, its App. I, ``REFERENCE.md``); section numbers (``§4.1``), the arXiv id
  and equation/appendix labels are not numbers;
* integers with ``%`` or ``×`` are not checked (too many are ranges and parameters to tell apart
  by pattern); the audit of 2026-12-04 read them by hand.

A number that also occurs in the code by coincidence passes: this is a guard against results
typed into prose, not a proof that every number is right. Claims about *other* seeds or profiles
than the executed one are checked by their own tests (``test_chapter7_*`` below).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))

# a decimal number; not a section (§4.1), an appendix label (App. E.2), an arXiv id (also in a URL) or a version
DECIMAL = re.compile(r"(?<![\w.§:/])(?<!eq\. )(?<!App\. )\d+\.\d+(?![\d.]*\d)")

#: Numbers a chapter's prose quotes from outside the repository's code: (chapter file, number) -> source.
QUOTED = {
    ("05_cifar10_table1.ipynb", "0.02"): "App. I / REFERENCE §4: tuned client lr with momentum",
    ("05_cifar10_table1.ipynb", "0.05"): "App. I / REFERENCE §4: tuned client lr without momentum (also the demo's lr, "
                                          "fedlib.experiments.cifar10.PROFILES)",
    ("05_cifar10_table1.ipynb", "0.005"): "App. I: FedProx mu at E = 2",
    ("05_cifar10_table1.ipynb", "0.001"): "App. I: FedProx mu at E ~ U(2, 5)",
    ("05_cifar10_table1.ipynb", "0.9"): "App. I: momentum; REFERENCE: the official gmf",
    ("05_cifar10_table1.ipynb", "81.15"): "paper §6: hybrid momentum 81.15 ± 0.38 %",
    ("05_cifar10_table1.ipynb", "0.38"): "paper §6: hybrid momentum 81.15 ± 0.38 %",
    ("05_cifar10_table1.ipynb", "77.49"): "paper §6: server momentum alone 77.49 ± 0.25 %",
    ("05_cifar10_table1.ipynb", "0.25"): "paper §6: server momentum alone 77.49 ± 0.25 %",
    ("05_cifar10_table1.ipynb", "9.4"): "REFERENCE §6: 9.4k images/s, measured outside this repository (said so)",
}


def _cells(path: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def _occurs(number: str, text: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(number) + r"(?!\d)", text) is not None


def unexplained_decimals(name: str, markdown: list[str], code: str) -> list[str]:
    found = []
    for k, md in enumerate(markdown):
        for m in DECIMAL.finditer(md):
            number = m.group()
            if not _occurs(number, code) and (name, number) not in QUOTED:
                found.append(f"{name}, markdown cell {k}: {number!r} in ...{md[max(0, m.start() - 60):m.end() + 20]!r}...")
    return found


def test_the_pattern_finds_results_and_skips_labels():
    text = "FedNova reaches 0.31 while FedAvg stalls at 0.52 (§4.1, App. E.2, eq. 4.5, arXiv:2007.07481); 12.5 steps"
    assert [m.group() for m in DECIMAL.finditer(text)] == ["0.31", "0.52", "12.5"]
    found = unexplained_decimals("x.ipynb", [text], "lr = 0.52\nassert ratio < 12.5")
    assert len(found) == 1 and found[0].startswith("x.ipynb, markdown cell 0: '0.31' in ..."), found
    assert not _occurs("0.5", "x = 0.55") and _occurs("0.5", "x = 0.5 * y")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_result_is_typed_into_a_chapter(chapter):
    code = "\n".join(_cells(chapter, "code"))
    assert unexplained_decimals(chapter.name, _cells(chapter, "markdown"), code) == []


def test_no_result_is_typed_into_the_front_page():
    text = (ROOT / "book" / "intro.md").read_text()
    assert [m.group() for m in DECIMAL.finditer(text)] == []


def test_quoted_numbers_are_still_quoted():
    """An allow-list entry whose number left the prose is stale: remove it."""
    for (name, number), _ in QUOTED.items():
        markdown = "\n".join(_cells(ROOT / "book" / name, "markdown"))
        assert any(m.group() == number for m in DECIMAL.finditer(markdown)), (name, number)


# --------------------------------------------------------------------------- chapter 7: other seeds
def _parameters(chapter: Path) -> dict:
    cell = next(c for c in json.loads(chapter.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    values: dict = {}
    exec("".join(cell["source"]), {}, values)  # noqa: S102 - the repository's own parameters cell (assignments)
    return values


def test_chapter7_seeds_1_to_3_lack_three_classes_as_the_prose_says():
    """Chapter 7's text: 'seeds 1, 2 and 3 of this chapter lack three of the ten classes' and
    'at seed 0 all ten do'. The executed chapter (seed 0) prints only its own count."""
    from fedlib.data import synthetic
    from fedlib.experiments import surrogate as S

    chapter = ROOT / "book" / "07_surrogate_logistic.ipynb"
    prose = " ".join(" ".join(_cells(chapter, "markdown")).split())
    assert "seeds 1, 2 and 3 of this chapter lack three of the ten classes" in prose
    assert "at seed 0 all ten do" in prose
    num_samples = list(_parameters(chapter)["num_samples"])
    seen = {s: S.observed_classes(synthetic(num_clients=len(num_samples), seed=s, num_samples=num_samples)).num_classes
            for s in range(4)}
    assert seen == {0: 10, 1: 7, 2: 7, 3: 7}

"""Library docstrings say which chapters use them (the d2l rule): every public fedlib module that a
chapter imports names each of those chapters in its module docstring.

The chapter -> module map is recomputed here from the notebooks' code cells (``import fedlib.x``,
``from fedlib.x import name``, ``from fedlib import x``; a name that is a submodule counts as that
module, any other name as the module it is imported from, e.g. ``from fedlib.data import synthetic``
imports the function re-exported by :mod:`fedlib.data`). Checked, for each such module:

* every chapter that imports it is *mentioned*: "chapter N", "chapters N, M and K", "(chapters 7, 8)";
* a *declaration* — "Used by chapter N" / "used by chapters N, M and K" / "Used in chapter N" (also
  "Used directly by", "Imported by") — names exactly those chapters, no other (other mentions, such as
  "through fedlib.experiments.synthetic.make_problem also by chapter 4", are free);
* the API page's hook turns each of them into a link (a list broken over two lines is linked only up
  to the line break), and nothing else: not a prefix of a longer number, not a code block.

Before this test 21 of the 28 imported modules failed: 20 did not mention some of their chapters
(``fedlib.plotting``, ``fedlib.report``, ``fedlib.schedules`` named none; ``fedlib.solvers`` said
"every chapter"; several named their chapter by title only) and ``fedlib.problems.logistic`` declared
chapters 4 and 9, which use it only through ``fedlib.experiments.synthetic``.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest
import yaml
from bookutil import autodoc_extension

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))

_LIST = r"[Cc]hapters? \d{1,2}(?:(?:, | and |–)\d{1,2})*(?!\d)"
MENTION = re.compile(r"(?<![\w`<])(?P<list>" + _LIST + ")")
DECLARATION = re.compile(r"\b(?:[Uu]sed|[Ii]mported)(?: directly)? (?:by|in) (?P<list>" + _LIST + ")")


def chapter_numbers(text: str) -> set[int]:
    """The chapters of a list ``chapter N`` / ``chapters N, M and K`` / ``chapters N–M`` (a range)."""
    nums, seps = re.findall(r"\d{1,2}", text), re.findall(r", | and |–", text)
    out = {int(nums[0])}
    for sep, a, b in zip(seps, nums, nums[1:]):
        out |= set(range(int(a), int(b) + 1)) if sep == "–" else {int(b)}
    return out


def _chapters_matched(pattern: re.Pattern, doc: str) -> set[int]:
    """The union of the chapter lists ``pattern`` (a group ``list``) finds in ``doc``, lines joined."""
    text = " ".join((doc or "").split())
    return set().union(*(chapter_numbers(m.group("list")) for m in pattern.finditer(text)))


def declared_chapters(doc: str) -> set[int]:
    """The chapters a docstring declares as its users (union over its declarations)."""
    return _chapters_matched(DECLARATION, doc)


def mentioned_chapters(doc: str) -> set[int]:
    """Every chapter a docstring names as "chapter N" / "chapters N, M and K"."""
    return _chapters_matched(MENTION, doc)


def _imported_module(package: str, name: str) -> str:
    """What ``from package import name`` binds comes from: the submodule ``package.name`` if the name is
    one, else ``package`` itself (Python looks the attribute up first)."""
    module = importlib.import_module(package)
    if hasattr(module, name):
        obj = getattr(module, name)
        return obj.__name__ if inspect.ismodule(obj) else package
    return f"{package}.{name}"


def _code(cell) -> str:
    src = "".join(cell["source"])
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))


def chapter_imports() -> dict[str, set[int]]:
    """Public fedlib module -> the chapters (NN of ``book/NN_*.ipynb``) whose code imports it."""
    found: dict[str, set[int]] = {}
    for path in NOTEBOOKS:
        chapter = int(path.name[:2])
        for cell in json.loads(path.read_text(encoding="utf8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            for node in ast.walk(ast.parse(_code(cell))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module.split(".")[0] != "fedlib":
                        continue
                    modules = [_imported_module(node.module, alias.name) for alias in node.names]
                else:
                    continue
                for name in modules:
                    parts = name.split(".")
                    if parts[0] == "fedlib" and not any(p.startswith("_") for p in parts):
                        found.setdefault(name, set()).add(chapter)
    return found


def _autodoc_ext():
    return autodoc_extension()


def test_chapter_numbers_are_the_toc_positions():
    """"chapter N" is the NN of book/NN_*.ipynb and the N-th chapter of _toc.yml (the numbered book)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf8"))
    files = [entry["file"] for entry in toc["chapters"]]
    assert [f"book/{p.stem}" for p in NOTEBOOKS] == files[:len(NOTEBOOKS)]
    assert [int(p.name[:2]) for p in NOTEBOOKS] == list(range(1, len(NOTEBOOKS) + 1))


def test_declaration_parser():
    assert declared_chapters("Used by chapter 6 (:func:`make_algorithm`).") == {6}
    assert declared_chapters("Used by chapters 1, 3, 7 and\n    10 (the data).") == {1, 3, 7, 10}
    assert declared_chapters("The package itself is used by chapters 2, 4 and 5.") == {2, 4, 5}
    assert declared_chapters("Used in chapters 2–4.") == {2, 3, 4}
    assert declared_chapters("Used by chapters 7 and 10; through make_problem also by chapter 4") == {7, 10}
    assert declared_chapters('Used by the chapter "Your own model".') == set()
    assert declared_chapters("Used by every chapter.") == set()
    assert declared_chapters("Used by chapter 12") == {12}
    assert mentioned_chapters("on quadratic clients (chapters 7, 8). Chapter 5 (Table 1) and chapter 9.") == {
        5, 7, 8, 9}
    assert mentioned_chapters('the chapter "Your own model", ``chapter 3``, subchapter 4') == set()


def test_map_is_computed():
    """The map finds the forms the chapters use (else the next test checks nothing)."""
    found = chapter_imports()
    assert len(found) >= 25
    assert found["fedlib.experiments.cifar10"] == {5}  # from fedlib.experiments import cifar10
    assert found["fedlib.engines.stacked"] == {6}  # from fedlib.engines.stacked import ...
    assert found["fedlib.anatomy"] == {1}  # from fedlib import anatomy, rule, ...
    assert 3 in found["fedlib.data"] and "fedlib.data.synthetic" not in found  # the re-exported function
    assert "fedlib" not in found


MAP = sorted(chapter_imports().items())


@pytest.mark.parametrize("module,chapters", MAP, ids=[name for name, _ in MAP])
def test_module_docstring_names_its_chapters(module, chapters):
    doc = inspect.getdoc(importlib.import_module(module)) or ""
    missing = chapters - mentioned_chapters(doc)
    assert not missing, f"{module}: imported by chapters {sorted(chapters)}, its docstring misses {sorted(missing)}"
    declared = declared_chapters(doc)
    assert not declared or declared == chapters, (
        f"{module}: imported by chapters {sorted(chapters)}, its docstring declares {sorted(declared)} as users")


@pytest.mark.parametrize("module,chapters", MAP, ids=[name for name, _ in MAP])
def test_chapters_become_links_on_the_api_page(module, chapters):
    """The API page's hook (book/_ext/fedlib_autodoc.py) links a mention of every chapter."""
    docnames = {int(p.name[:2]): f"/book/{p.stem}" for p in NOTEBOOKS}
    doc = inspect.getdoc(importlib.import_module(module)) or ""
    lines = _autodoc_ext().chapter_links(doc.splitlines(), docnames)
    linked = {int(n) for n in re.findall(r":doc:`(?:[Cc]hapters? )?(\d{1,2}) <", "\n".join(lines))}
    assert chapters <= linked, (module, sorted(chapters - linked))


# ------------------------------------------------------------------------- chapter links: longer numbers, code blocks
def _autodoc():
    return autodoc_extension()


def test_chapter_links_never_link_a_prefix_of_a_longer_number():
    """'chapter 10.5' or 'chapter 100' is not chapter 1 or 10 followed by the rest of the number:
    the number's last digits were allowed to be a digit at the end of the text or before a space."""
    mod = _autodoc()
    chapters = {n: f"/book/{n:02d}_x" for n in range(1, 11)}
    for text in ("chapter 10.5", "chapter 100", "chapter 123", "see chapter 100 here"):
        assert mod.chapter_links([text], chapters) == [text], text
    # the numbers it knows are still linked, with what follows them left as it is
    assert mod.chapter_links(["chapter 10."], chapters) == [":doc:`chapter 10 </book/10_x>`."]
    assert mod.chapter_links(["chapter 1's table"], chapters) == [":doc:`chapter 1 </book/01_x>`'s table"]
    assert mod.chapter_links(["chapters 2–4"], chapters) == [":doc:`chapters 2 </book/02_x>`–:doc:`4 </book/04_x>`"]


def test_chapter_links_leave_a_code_block_directive_alone():
    """The body of '.. code-block:: python' is code (its first line does not end in '::', which was
    the only literal block recognised): a 'chapter 6' there would become :doc: markup shown verbatim."""
    mod = _autodoc()
    chapters = {6: "/book/06_x"}
    doc = ["See chapter 6.", "", ".. code-block:: python", "", "    run(chapter 6)", "", "After chapter 6."]
    assert mod.chapter_links(doc, chapters) == [
        "See :doc:`chapter 6 </book/06_x>`.", "", ".. code-block:: python", "", "    run(chapter 6)", "",
        "After :doc:`chapter 6 </book/06_x>`."]

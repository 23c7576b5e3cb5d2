"""The API reference page's contents (audit of 2026-12-04) and chapter 8's summary of the paired check.

* book/api.md documents several hundred functions and classes; Sphinx put each into the page's
  contents, numbered under the TOC's numbering ("11.11.20.1. StackedEngine.params()"), and the titled
  sections of module docstrings among them, with gaps ("11.11.12. A round"). ``toc_object_entries:
  false`` (_config.yml) leaves the objects out and book/_ext/fedlib_autodoc.py turns a module
  docstring's own section titles into rubrics: the contents list the page's modules only.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"  # as tests/test_browser.py finds the built book


def _autodoc_ext():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        return importlib.import_module("fedlib_autodoc")
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))


def test_config_leaves_objects_out_of_the_contents():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))["sphinx"]["config"]
    assert config["toc_object_entries"] is False


def test_section_rubrics_keeps_napoleon_sections():
    ext = _autodoc_ext()
    lines = ["Engine.", "", "A round", "-------", "text", "", "  Nested title", "  ~~~~~~~~~~~~", "",
             "Example", "-------", ">>> 1", "", "Parameters", "----------", "x : a number", "",
             "short", "--------------", "", "----", "----"]
    out = ext.section_rubrics(lines, keep=frozenset({"example", "parameters"}))
    assert out == ["Engine.", "", ".. rubric:: A round", "", "text", "", "  .. rubric:: Nested title", "", "",
                   "Example", "-------", ">>> 1", "", "Parameters", "----------", "x : a number", "",
                   ".. rubric:: short", "", "", "----", "----"]
    # an underline shorter than the title less one is no underline
    assert ext.section_rubrics(["A round", "---"]) == ["A round", "---"]


def _module_docstrings():
    names = re.findall(r"automodule:: (\S+)", (ROOT / "book" / "api.md").read_text(encoding="utf8"))
    return {name: inspect.getdoc(importlib.import_module(name)) or "" for name in names}


def test_module_docstrings_keep_no_section_title_but_napoleons():
    """What the page's module docstrings become: no underlined title is left but those napoleon reads
    (Example, Notes, ...); the module docstrings do have titles of their own (else this checks nothing)."""
    from sphinx.ext.napoleon import Config

    ext = _autodoc_ext()
    from sphinx.ext.napoleon.docstring import NumpyDocstring
    keep = frozenset(n.lower() for n in NumpyDocstring("", Config(napoleon_custom_sections=[["Attributes",
                                                                                             "params_style"]]))._sections)
    underline = re.compile(r"^\s*([=\-`:'\"~^_*+#<>])\1+\s*$")
    converted = 0
    for name, doc in _module_docstrings().items():
        lines = doc.splitlines()
        out = ext.section_rubrics(lines, keep)
        converted += sum(line.lstrip().startswith(".. rubric:: ") for line in out)
        for title, under in zip(out, out[1:]):
            if title.strip() and underline.match(under) and len(under.strip()) >= len(title.strip()) - 1:
                assert title.strip().lower() in keep, (name, title)
    assert converted >= 5  # "Extending fedlib", "A round", "Randomness", ...


_NUMBERED = re.compile(r"^\s*(\d+(?:\.\d+)*)\.\s")


def api_page_contents_problems(html_dir: Path) -> list[str]:
    """What is wrong with the numbered entries of the API page's navigation (sidebars and the page's
    contents): entries numbered deeper than module level (chapter.section), or fewer module entries
    than the page's ``##`` sections."""
    page = (html_dir / "book" / "api.html").read_text(encoding="utf8")
    problems, sections = [], set()
    for nav in re.findall(r"<nav\b.*?</nav>|<div id=\"jb-print-toc\">.*?</div>", page, re.S):
        for text in re.findall(r"<a class=\"reference internal[^\"]*\" href=\"[^\"]*\">(.*?)</a>", nav, re.S):
            text = re.sub(r"<[^>]+>", "", text).strip()
            m = _NUMBERED.match(text)
            if not m:
                continue
            number = m.group(1).split(".")
            if len(number) > 2:
                problems.append(text)
            elif len(number) == 2:
                sections.add(text)
    headings = [line for line in (ROOT / "book" / "api.md").read_text(encoding="utf8").splitlines()
                if line.startswith("## ")]
    if len(sections) < len(headings):
        problems.append(f"{len(sections)} module entries for the page's {len(headings)} sections")
    return problems


def test_built_api_page_lists_modules_only():
    if not (HTML_DIR / "book" / "api.html").is_file():
        pytest.skip(f"{HTML_DIR}/book/api.html missing: run `make book` first")
    problems = api_page_contents_problems(HTML_DIR)
    assert not problems, problems[:10]

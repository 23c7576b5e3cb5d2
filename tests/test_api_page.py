"""The API reference page's contents and chapter 8's summary of the paired check.

* book/api.md documents several hundred functions and classes; Sphinx put each into the page's
  contents, numbered under the TOC's numbering ("11.11.20.1. StackedEngine.params()"), and the titled
  sections of module docstrings among them, with gaps ("11.11.12. A round"). ``toc_object_entries:
  false`` (_config.yml) leaves the objects out and book/_ext/fedlib_autodoc.py turns a module
  docstring's own section titles into rubrics: the contents list the page's modules only.
* ``fedlib.experiments.speedup.sampling_summary`` states the paired displacement errors that chapter 8
  asserts on, computed from the rows.
"""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from bookutil import HTML_DIR, autodoc_extension, require_book_module, unavailable

from fedlib.experiments import speedup as S

ROOT = Path(__file__).resolve().parents[1]


def _autodoc_ext():
    return autodoc_extension()


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
    require_book_module("sphinx")
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
        unavailable(f"{HTML_DIR}/book/api.html missing: run `make book` first")
    problems = api_page_contents_problems(HTML_DIR)
    assert not problems, problems[:10]


# --- chapter 8's summary ---------------------------------------------------------------------------------


def _srow(m, q, T, value, eff):
    return S.SamplingRow("fednova", "with-replacement", m, q, T, 6.5, 0.01, value, 0.01, eff)


def _brow(q, T, choice, averaged, limit):
    averaged, limit = np.asarray(averaged, dtype=float), np.asarray(limit, dtype=float)
    return S.BiasRow(q, T, 0.01 * 1000 / T, choice, 0.3, 0.01, 0.3, 0.05, 0.08, 1.0, averaged, limit)


def test_sampling_summary_states_the_computed_paired_errors():
    big = [_srow(256, 4, 1024, 0.2, 3.95), _srow(256, 16, 1024, 0.1, 15.1)]
    small = [_srow(4, 4, 1024, 0.3, 2.29), _srow(4, 16, 1024, 0.25, 3.4)]
    rng = np.random.default_rng(0)
    bias = []
    for q in (2, 4):
        x_star = rng.normal(size=3)
        for T in (1000, 4000):
            fixed = x_star + 0.1 * rng.normal(size=(3, 3))
            bias.append(_brow(q, T, "population", fixed, x_star))
            for choice in ("participants", "selected_p"):
                x_c = x_star + rng.normal(size=3) / q
                bias.append(_brow(q, T, choice, fixed + (x_c - x_star) + 0.05 * rng.normal(size=(3, 3)), x_c))
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    sentence = text[text.index("Paired with the fixed run"):]
    assert "$T = 4000$" in sentence and "$T = 1000$" not in sentence
    for q in (2, 4):
        values = []
        for choice in ("participants", "selected_p"):
            r, f = S.bias_row(bias, q, 4000, choice), S.bias_row(bias, q, 4000, "population")
            by_hand = np.linalg.norm((r.averaged - f.averaged).mean(axis=0) - (r.limit - f.limit)) / np.linalg.norm(
                r.limit - f.limit)
            assert S.paired_displacement_error(bias, q, 4000, choice) == pytest.approx(by_hand, rel=1e-12)
            values.append(f"{by_hand:.3g}")
        assert f"$q = {q}$: {values[0]} (the library's default), {values[1]} (App. H's)" in sentence
    # another set of iterates, other numbers in the sentence (they are computed, not typed)
    shifted = [r._replace(averaged=r.averaged + 0.2) if r.tau_eff == "selected_p" else r for r in bias]
    other = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, shifted)
    want = f"{S.paired_displacement_error(shifted, 2, 4000, 'selected_p'):.3g} (App. H's)"
    assert want in other and want not in text


def test_sampling_summary_leaves_the_paired_sentence_out_without_pairs():
    big = [_srow(256, 4, 1024, 0.2, 3.95), _srow(256, 16, 1024, 0.1, 15.1)]
    small = [_srow(4, 4, 1024, 0.3, 2.29), _srow(4, 16, 1024, 0.25, 3.4)]
    zeros = np.zeros((2, 3))
    # no predicted displacement (limits equal) and iterates of other seeds: nothing to pair
    bias = [_brow(2, 1000, "population", zeros, np.zeros(3)), _brow(2, 4000, "population", zeros, np.zeros(3)),
            _brow(2, 1000, "participants", zeros, np.ones(3)), _brow(2, 4000, "participants", zeros, np.zeros(3)),
            _brow(2, 4000, "selected_p", np.zeros((3, 3)), np.ones(3))]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "must be fixed" in text and "Paired" not in text
    # one pair possible: only it is stated
    bias[-1] = _brow(2, 4000, "selected_p", zeros + 1.0, np.ones(3))
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16, bias)
    assert "$q = 2$: 0 (App. H's)." in text and "library's default)" not in text

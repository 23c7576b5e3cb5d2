r"""Mutation-testing pass on the book's Sphinx extension ``book/_ext/search_titles.py`` (the search index's section
titles without LaTeX: ``plain_math``, ``rewrite_index``, the build-finished hook), loaded from its file: each test
pins behaviour that a surviving mutant changed; its docstring names the mutant. Expected titles are spelled by hand.

Mutants of fb91484..97fac41 (book/_ext/search_titles.py: plain_math, rewrite_index, _after_build) (pass described in
tests/README.md, Mutation passes): 10 mutants, one at a time, ``pytest -x`` on test_book_search_titles.py, then this
file: 5 killed by the suite, 5 killed here, 0 equivalent.
  BK2 the run-in check on the whole last piece (``out[-1].isalnum()``: 'chi^2kappa^2'), BK5 the final ``.strip()``
  dropped (' E tau_i ...' of a title starting with ``\mathbb E``), BK6 every title counted as changed, BK7 a location
  listed twice when two titles read alike, BK10 the spacing branch skipped (``\,`` looked up as a macro named
  None): killed by the suite (test_book_search_titles.py).
  BK1 ``\mathrm{...}`` not unwrapped ('mathrmVar'), BK3 ``\!`` read as a space, BK4 runs of spaces kept, BK8 the
  index written without sorted keys (its bytes hung on the order of the keys read), BK9 the index rewritten after a
  failed build: killed here.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from bookutil import book_extension


@pytest.fixture(scope="module")
def ext():
    return book_extension("search_titles")


def test_text_macros_are_unwrapped_and_spacing_is_squeezed(ext):
    r"""``\mathrm{Var}`` and its kin read as their text (mutant BK1: 'mathrmVar'); ``\!`` (a negative thin space)
    is no space (BK3: 'x ^2'); a space, ``\,`` and a space read as one space (BK4: three)."""
    assert ext.plain_math(r"\mathrm{Var}\,g, \mathit{pos}, \operatorname{tr} A") == "Var g, pos, tr A"
    assert ext.plain_math(r"\|x\!^2\|") == "||x^2||"
    assert ext.plain_math(r"\tau \, \eta") == "tau eta"


def _index_file(path: Path, index: dict) -> None:
    path.write_text("Search.setIndex(" + json.dumps(index) + ")", encoding="utf-8")


def test_the_rewritten_index_does_not_depend_on_the_order_of_its_keys(ext, tmp_path):
    """Two indexes of the same entries, their keys in other orders, are written byte for byte alike, with sorted
    keys as Sphinx writes them (mutant BK8: the keys in the order read)."""
    a = {"titles": ["X"], "alltitles": {r"\tau_i": [[0, "a"]], "Intro": [[0, None]]}, "docnames": ["x"]}
    b = {"docnames": ["x"], "alltitles": {"Intro": [[0, None]], r"\tau_i": [[0, "a"]]}, "titles": ["X"]}
    _index_file(tmp_path / "a.js", a)
    _index_file(tmp_path / "b.js", b)
    assert ext.rewrite_index(tmp_path / "a.js") == ext.rewrite_index(tmp_path / "b.js") == 1
    expected = {"alltitles": {"Intro": [[0, None]], "tau_i": [[0, "a"]]}, "docnames": ["x"], "titles": ["X"]}
    assert (tmp_path / "a.js").read_text(encoding="utf-8") == (tmp_path / "b.js").read_text(encoding="utf-8") == \
        "Search.setIndex(" + json.dumps(expected, sort_keys=True) + ")"


@pytest.mark.parametrize("fmt, exception, rewritten", [("html", None, True), ("html", RuntimeError("failed"), False),
                                                       ("latex", None, False)])
def test_the_index_is_rewritten_after_a_successful_html_build_only(ext, tmp_path, fmt, exception, rewritten):
    """The build-finished hook rewrites searchindex.js after an HTML build that succeeded; after a failed build
    (an index half written, or another build's) it leaves the file alone (mutant BK9: rewritten whatever the
    build's exception)."""
    _index_file(tmp_path / "searchindex.js", {"alltitles": {r"\eta": [[0, None]]}})
    before = (tmp_path / "searchindex.js").read_text(encoding="utf-8")
    ext._after_build(SimpleNamespace(builder=SimpleNamespace(format=fmt), outdir=str(tmp_path)), exception)
    after = (tmp_path / "searchindex.js").read_text(encoding="utf-8")
    assert (after != before) is rewritten
    if rewritten:
        assert json.loads(after[len("Search.setIndex("):-1]) == {"alltitles": {"eta": [[0, None]]}}

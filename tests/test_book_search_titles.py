r"""The book's search lists section titles without LaTeX (book/_ext/search_titles.py): Sphinx keyed them by the
math role's source, "Where FedAvg’s error comes from: \chi^2_{p\|w} and \tau_{\text{eff}}"; they now read as
fedlib's code spells them, "... chi^2_p||w and tau_eff"."""
from __future__ import annotations

import json

import pytest
from bookutil import HTML_DIR, book_extension, unavailable


@pytest.fixture(scope="module")
def ext():
    return book_extension("search_titles")


@pytest.mark.parametrize("latex, plain", [
    (r"\tau_{\text{eff}} and \chi^2 per round", "tau_eff and chi^2 per round"),
    (r"The shape of a_i and its length \|a_i\|_1", "The shape of a_i and its length ||a_i||_1"),
    (r"the \chi^2\kappa^2 floor", "the chi^2 kappa^2 floor"),  # two names apart, not 'chi^2kappa^2'
    (r"\Delta_i = -\eta G_i a_i", "Delta_i = -eta G_i a_i"),
    (r"small-\eta limit, O(\eta), x^*", "small-eta limit, O(eta), x^*"),
    (r"\mathbb E\,\tau_i \le \eta\mu, \mathbb{E}", "E tau_i <= eta mu, E"),
    ("no math: FedNova’s rule (eq. 4)", "no math: FedNova’s rule (eq. 4)"),
])
def test_plain_math_spells_latex_as_the_code_does(ext, latex, plain):
    assert ext.plain_math(latex) == plain


def test_rewrite_index_keeps_everything_but_the_titles_and_merges_titles_that_read_alike(ext, tmp_path):
    index = {"alltitles": {r"\tau_i": [[0, "a"]], "tau_i": [[1, "b"], [0, "a"]], "Intro": [[2, None]]},
             "docnames": ["x", "y", "z"], "terms": {"tau": [0, 1]}, "titles": ["X", "Y", "Z"]}
    path = tmp_path / "searchindex.js"
    path.write_text("Search.setIndex(" + json.dumps(index, sort_keys=True) + ")", encoding="utf-8")
    assert ext.rewrite_index(path) == 1
    raw = path.read_text(encoding="utf-8")
    assert raw.startswith("Search.setIndex({") and raw.endswith("})")
    got = json.loads(raw[len("Search.setIndex("):-1])
    assert got["alltitles"] == {"tau_i": [[0, "a"], [1, "b"]], "Intro": [[2, None]]}
    assert {k: v for k, v in got.items() if k != "alltitles"} == {k: v for k, v in index.items() if k != "alltitles"}
    assert ext.rewrite_index(path) == 0  # nothing left to rewrite
    (tmp_path / "other.js").write_text("var x = 1;")
    with pytest.raises(ValueError, match="not a Sphinx search index"):
        ext.rewrite_index(tmp_path / "other.js")


def test_the_built_books_search_titles_hold_no_latex(ext):
    path = HTML_DIR / "searchindex.js"
    if not path.is_file():
        unavailable(f"{path} missing: run `make book` first")
    raw = path.read_text(encoding="utf-8")
    titles = json.loads(raw[len("Search.setIndex("):raw.rindex(")")])["alltitles"]
    assert [t for t in titles if "\\" in t] == []
    # chapter 1's section (its heading is "$\tau_{\text{eff}}$ and $\chi^2$ per round" in the notebook)
    assert "tau_eff and chi^2 per round" in titles

"""The rendered book as a reader sees it: checks on the built HTML (``_build/html``) and on the
sources that produce it.

The built pages are found the way tests/test_browser.py finds them: ``make book`` writes
``_build/html``; locally a missing build skips the tests that need it, in CI (``CI=true``) it
fails them. No browser: the HTML is parsed as written (MathJax has not run, so math is still
``\\(...\\)`` inside ``span.math`` / ``div.math``).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from bookutil import HTML_DIR, built_pages, toc_docnames

ROOT = Path(__file__).resolve().parents[1]




# --------------------------------------------------------------------------- sources

def _markdown_sources(docname: str) -> list[str]:
    """The Markdown a page is written in: a .md file, or a notebook's markdown cells."""
    md = ROOT / f"{docname}.md"
    if md.is_file():
        return [md.read_text(encoding="utf8")]
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def _outside_code(text: str) -> str:
    """``text`` without fenced blocks (```...```, :::...) and inline code spans."""
    text = re.sub(r"^(```|:::).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


_INLINE_MATH = re.compile(r"(?<!\\)\$(?!\$)([^$\n]+?)(?<!\\)\$")


@pytest.mark.parametrize("docname", toc_docnames())
def test_math_in_markdown_tables_has_no_escaped_pipe(docname):
    """In a Markdown table row, ``\\|`` is an escaped column separator: the table parser takes the
    backslash away even inside ``$...$``, so ``$\\|a_i\\|_1$`` rendered as ``|a_i|_1`` (an absolute
    value, not the norm). Inside a table, write ``\\Vert`` (or ``\\lVert``/``\\rVert``)."""
    bad = []
    for text in _markdown_sources(docname):
        for line in _outside_code(text).splitlines():
            if line.lstrip().startswith("|"):
                bad += [m.group(0) for m in _INLINE_MATH.finditer(line) if "\\|" in m.group(1)]
    assert not bad, f"{docname}: math with \\| in a table row (write \\Vert): {bad}"


_MANUAL_NUMBER = re.compile(r"^#{1,6}\s+(\d+(\.\d+)*[.)]|part\s+\d+\.)\s", re.I)


@pytest.mark.parametrize("docname", toc_docnames())
def test_headings_have_no_number_of_their_own(docname):
    """The TOC is numbered (``_toc.yml``: ``numbered: true``): Sphinx prefixes every heading
    with its section number, so a heading written as ``## 1. ...`` showed as ``10.1. 1. ...``."""
    bad = [line for text in _markdown_sources(docname)
           for line in _outside_code(text).splitlines() if _MANUAL_NUMBER.match(line)]
    assert not bad, f"{docname}: headings numbered by hand: {bad}"


@pytest.mark.parametrize("docname", toc_docnames())
def test_no_formula_ends_in_an_equals_sign(docname):
    """``$\\sigma_0 = $ `sigma_bound``` showed "σ₀ = sigma_bound": a formula whose value is a
    variable name the reader has to look up in the parameters cell. Give the value (printed by the
    cell) or name the parameter in words."""
    bad = [m.group(0) for text in _markdown_sources(docname)
           for m in _INLINE_MATH.finditer(text) if m.group(1).rstrip().endswith("=")]
    assert not bad, (docname, bad)


def test_build_joins_only_consecutive_prints():
    """A cell that prints as it goes leaves one stream output per print; the build joins each run of
    consecutive prints into one output (one box on the page), and keeps every table or figure
    between two prints where it was. MyST-NB's ``nb_merge_streams`` would move the later prints
    above it, so the configuration must not turn it on."""
    import nbformat
    from bookutil import build_script

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    assert not config["sphinx"]["config"].get("nb_merge_streams")
    stream = lambda text, name="stdout": nbformat.v4.new_output("stream", name=name, text=text)
    table = nbformat.v4.new_output("display_data", data={"text/markdown": "| a |\n|---|\n| 1 |"})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("run()", outputs=[
        stream("fixed FedAvg 0.6 s\n"), stream("fixed FedNova 0.9 s\n"), table, stream("after the table\n"),
        stream("a warning\n", "stderr"), stream("more\n", "stderr")])])
    assert build_script().merge_adjacent_streams(nb) == 2
    outs = nb.cells[0].outputs
    assert [(o.output_type, o.get("name"), o.get("text")) for o in outs] == [
        ("stream", "stdout", "fixed FedAvg 0.6 s\nfixed FedNova 0.9 s\n"), ("display_data", None, None),
        ("stream", "stdout", "after the table\n"), ("stream", "stderr", "a warning\nmore\n")]


# --------------------------------------------------------------------------- the built pages

@pytest.fixture(scope="module")
def pages() -> dict[str, object]:
    """docname -> parsed HTML of every page of the TOC."""
    return built_pages()


def _article(soup):
    return soup.find("article") or soup


def _math_tex(node) -> str:
    """The TeX of a ``span.math`` / ``div.math`` as Sphinx wrote it (without ``\\(``/``\\)``)."""
    text = node.get_text().strip()
    for left, right in (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$"), ("$", "$")):
        if text.startswith(left) and text.endswith(right):
            return text[len(left):-len(right)].strip()
    return text


def test_math_in_prose_tables_is_the_source_math(pages):
    """Every formula in a table of the prose (not a table a cell printed) is, character for
    character, a formula of the page's Markdown: the table parser must not have eaten a ``\\|``."""
    for docname, soup in pages.items():
        if docname == "book/api":  # its tables are reStructuredText, from the docstrings
            continue
        sources = " ".join(_markdown_sources(docname))
        source_math = {re.sub(r"\s+", "", m.group(1)) for m in _INLINE_MATH.finditer(sources)}
        if not source_math:
            continue
        for table in _article(soup).find_all("table"):
            if table.find_parent(class_="cell_output") is not None:
                continue
            for node in table.select(".math"):
                tex = re.sub(r"\s+", "", _math_tex(node))
                assert tex in source_math, (docname, tex)


def test_section_titles_are_not_numbered_twice(pages):
    """After Sphinx's ``10.1.`` the title itself does not start with another number."""
    for docname, soup in pages.items():
        for h in _article(soup).find_all(["h1", "h2", "h3", "h4"]):
            number = h.find(class_="section-number")
            title = h.get_text().replace(number.get_text(), "", 1) if number else h.get_text()
            assert not re.match(r"\s*(\d+(\.\d+)*[.)]|part\s+\d+\.)\s", title, re.I), (docname, h.get_text())


def test_one_output_box_per_run_of_prints(pages):
    """Consecutive prints of one cell show as one block, not one box per line (chapter 4's progress
    lines were nine boxes)."""
    for docname, soup in pages.items():
        for out in _article(soup).select("div.cell_output"):
            kids = out.find_all(recursive=False)
            for a, b in zip(kids, kids[1:]):
                ka, kb = set(a.get("class") or []), set(b.get("class") or [])
                same = ({"stream", "stderr"} & ka) and (ka & {"stream", "stderr"}) == (kb & {"stream", "stderr"})
                assert not same, (docname, a.get_text()[:60], b.get_text()[:60])


def test_tables_show_no_raw_non_finite_numbers(pages):
    """A table cell reads ``inf`` or ``nan`` only where a Python float was printed as it is
    (e.g. a time to reach a loss that a run never reached): say what it means instead."""
    for docname, soup in pages.items():
        cells = [td.get_text(" ", strip=True) for td in _article(soup).find_all(["td", "th"])]
        bad = [c for c in cells if re.fullmatch(r"[-+]?(inf|nan)( ± [-+]?(inf|nan))?", c, re.I)]
        assert not bad, (docname, bad)


_RAW_OUTPUT = re.compile(
    r"<(Figure|Axes|matplotlib\.[\w.]+|IPython\.core\.[\w.]+) |object at 0x[0-9a-f]+|Traceback \(most recent"
    r"|\b\w*Warning: |\d+%\|[#█▏▎▍▌▋▊▉ ]*\|")


def test_outputs_have_no_stderr_reprs_or_progress_bars(pages):
    """No stderr block, traceback, warning, object repr (``<Figure size ...>``,
    ``<IPython.core.display.Markdown object>``) or tqdm bar in what the chapters print."""
    for docname, soup in pages.items():
        art = _article(soup)
        assert not art.select(".stderr, .traceback, .output.error"), docname
        for out in art.select("div.cell_output"):
            text = out.get_text()
            match = _RAW_OUTPUT.search(text)
            assert not match, (docname, text[max(0, match.start() - 80):match.end() + 80])


def test_internal_links_and_anchors_resolve(pages):
    """Every link of a page that stays in the book reaches an existing page, and its ``#anchor``
    an element of that page (the cross-references of the chapters and the API reference)."""
    from bs4 import BeautifulSoup

    ids: dict[Path, set] = {}

    def ids_of(path: Path) -> set:
        if path not in ids:
            soup = BeautifulSoup(path.read_text(encoding="utf8"), "html.parser")
            ids[path] = {t["id"] for t in soup.find_all(id=True)}
        return ids[path]

    checked = 0
    for docname, soup in pages.items():
        page = (HTML_DIR / f"{docname}.html").resolve()
        ids[page] = {t["id"] for t in soup.find_all(id=True)}
        for a in soup.find_all("a", href=True):
            href = html.unescape(a["href"])
            if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):  # http:, mailto:, ...
                continue
            if href == "#":  # the page itself: the theme's own link to the current page, else a dead link
                assert a.find_parent("article") is None, (docname, a.get_text()[:60])
                continue
            path, _, anchor = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert target.exists(), (docname, href)
            if anchor and target.suffix == ".html":
                assert anchor in ids_of(target), (docname, href)
            checked += 1
    assert checked > 100


def test_pages_cite_no_private_notes(pages):
    """The built pages (chapters, their outputs, the API reference) do not send the reader to
    ``REFERENCE §N``, which the book does not contain."""
    for docname, soup in pages.items():
        assert "REFERENCE §" not in _article(soup).get_text(), docname


def test_pages_show_no_path_of_the_machine_that_built_them(pages):
    """The API reference showed the values of fedlib.data.cifar10.DEFAULT_SAMPLE_PATH / DEFAULT_LABELS_PATH and
    fedlib.results.REPOSITORY_RESULTS as the build machine's absolute paths (``/tmp/ci-check/data/results``): their
    docstrings hide the value (``:meta hide-value:``) and say where they point in the repository; no chapter
    prints the checkout's absolute path either (chapter 5 prints its results folder relative to it)."""
    for docname, soup in pages.items():
        assert str(ROOT) not in soup.get_text(), docname


def test_api_chapter_mentions_link_to_their_chapter(pages):
    """In the API reference, "chapter N" outside code is a link, and it leads to chapter N."""
    chapters = {int(d.split("/")[-1][:2]): d for d in toc_docnames() if re.match(r"\d\d_", d.split("/")[-1])}
    art = _article(pages["book/api"])
    linked = 0
    for a in art.find_all("a", href=True):
        m = re.fullmatch(r"\s*[Cc]hapters? (\d+)\s*|\s*(\d+)\s*", a.get_text())
        if m and re.search(r"\d\d_\w+\.html", a["href"]):
            n = int(m.group(1) or m.group(2))
            assert a["href"].split("#")[0].endswith(chapters[n].split("/")[-1] + ".html"), (a.get_text(), a["href"])
            linked += 1
    for text in art.find_all(string=re.compile(r"\b[Cc]hapters? \d")):
        if text.find_parent(["code", "pre", "a"]) is None and text.find_parent(class_="math") is None:
            for m in re.finditer(r"\b[Cc]hapters? (\d+)(?![\d.]\d)", text):
                assert int(m.group(1)) not in chapters, ("not a link", text.strip()[:120])
    assert linked > 20


def test_no_raw_rst_markup_on_the_pages(pages):
    """No ``:math:`...```, ``:func:`...``` or double-backquoted literal left as text: where a
    docstring (or a page) was not parsed as reStructuredText, the reader sees the markup."""
    role = re.compile(r":(math|func|meth|class|attr|mod|data|obj|exc|doc|ref):`|``")
    for docname, soup in pages.items():
        for text in _article(soup).find_all(string=role):
            if text.find_parent(["code", "pre", "script", "style"]) is None and text.find_parent(class_="math") is None:
                pytest.fail(f"{docname}: raw markup {text.strip()[:120]!r}")


def test_images_exist_and_carry_the_figures(pages):
    """Every ``<img>`` of a page points at a file of the build that is a real image."""
    for docname, soup in pages.items():
        page = (HTML_DIR / f"{docname}.html").resolve()
        for img in _article(soup).find_all("img"):
            src = (page.parent / img["src"]).resolve()
            assert src.is_file() and src.stat().st_size > 1000, (docname, img["src"])


def test_step_size_refusal_prints_a_readable_step():
    """Chapter 7 prints the refusal of a step that breaks App. C's condition: the step there read
    ``lr = 0.007016464154456234`` (a float's repr), now to 4 significant digits as the other numbers."""
    from fedlib import theory

    with pytest.raises(ValueError, match=r"^lr = 0\.007016 is too large for App\. C's condition"):
        theory.theorem1_max_beta2(0.007016464154456234, 2.0, 1000.0)


def test_outputs_print_no_float_reprs(pages):
    """A float printed with ``repr`` or ``str`` (17 significant digits) in what a chapter prints:
    numbers on the pages are formatted (chapter 10's eigenvalues near 1 keep 10 decimals on purpose)."""
    for docname, soup in pages.items():
        for out in _article(soup).select("div.cell_output"):
            text = out.get_text()
            match = re.search(r"(?<![\w.])\d*\.\d{13,}", text)
            assert not match, (docname, text[max(0, match.start() - 80):match.end() + 20])


def test_chapter6_figure_draws_fednova_in_the_books_red(pages):
    """Every figure colours an algorithm family the same way (fedlib.plotting.ALGORITHM_COLORS:
    FedAvg blue C0, FedNova red C3, FedProx orange C1). Chapter 6's figure used matplotlib's cycle,
    which drew FedNova in FedProx's orange."""
    from PIL import Image

    images = _article(pages["book/06_your_own_model"]).find_all("img")
    assert images
    page = (HTML_DIR / "book" / "06_your_own_model.html").resolve()
    colors = set()
    for img in images:
        with Image.open((page.parent / img["src"]).resolve()) as im:
            colors |= {rgb for _, rgb in im.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert (214, 39, 40) in colors, "no FedNova red (C3)"
    assert (31, 119, 180) in colors, "no FedAvg blue (C0)"
    assert (255, 127, 14) not in colors, "FedProx's orange (C1) in a figure without FedProx"


def test_every_figure_has_text_in_its_section(pages):
    """A figure is explained where it stands: the section that shows it has prose of its own
    (what is plotted against what), not only a heading and the code cell that draws it."""
    for docname, soup in pages.items():
        for section in _article(soup).find_all("section"):
            if not any(img.find_parent("section") is section for img in section.find_all("img")):
                continue
            words = sum(len(node.get_text().split()) for node in section.find_all(["p", "ul", "ol"], recursive=False))
            title = section.find(["h1", "h2", "h3", "h4"])
            assert words >= 15, (docname, title.get_text() if title else None, words)


def test_tables_fit_the_page(pages):
    """The content column holds about eight to ten numeric columns; chapter 7's table of 16 columns
    showed half of them (the ones about F and Theorem 2) only after scrolling sideways, chapter 8's
    of 12 its four terms. No table of the book has more than 11 columns (at a 1300-pixel window,
    tables of 9 to 11 columns still scroll a little)."""
    for docname, soup in pages.items():
        for table in _article(soup).find_all("table"):
            row = table.find("tr")
            cols = len(row.find_all(["td", "th"])) if row else 0
            assert cols <= 11, (docname, cols, row.get_text(" | ", strip=True)[:100])

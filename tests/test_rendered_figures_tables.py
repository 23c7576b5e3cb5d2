"""The rendered book as a reader sees it, second pass (after tests/test_rendered.py): figure alt
text, and tables narrow enough for the page.

The built pages are found as tests/test_rendered.py and tests/test_browser.py find them:
``make book`` writes ``_build/html``; locally a missing build skips the tests that need it, in CI
(``CI=true``) it fails them.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from bookutil import built_pages, toc_docnames

ROOT = Path(__file__).resolve().parents[1]




def _chapters() -> list[str]:
    return [d for d in toc_docnames() if (ROOT / f"{d}.ipynb").is_file()]


# --------------------------------------------------------------------------- figure alt text

_SHOW = re.compile(r"\bplt\.show\(|\bfig\.show\(|\bdisplay\(\s*fig\b")


def _figure_cells(nb) -> list:
    """The code cells that show a figure: they call ``plt.show()`` (or display a figure), or call
    a function of the notebook whose body does."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    showers = set()
    for c in code:
        for m in re.finditer(r"^def (\w+)\(.*?(?=^\S|\Z)", c.source, flags=re.M | re.S):
            if _SHOW.search(m.group(0)):
                showers.add(m.group(1))
    calls = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, showers)) + r")\(") if showers else None
    out = []
    for c in code:
        body = re.sub(r"^def \w+\(.*?(?=^\S|\Z)", "", c.source, flags=re.M | re.S)  # calls, not definitions
        if _SHOW.search(body) or (calls and calls.search(body)):
            out.append(c)
    return out


def _alt_problem(alt) -> str | None:
    """Why ``alt`` is no use to a screen reader, or None."""
    if not isinstance(alt, str) or not alt.strip():
        return "missing or empty"
    if re.search(r"\.(png|svg|jpe?g|gif)\b", alt, flags=re.I) or "/" in alt.split()[0]:
        return f"a file name, not a description: {alt!r}"
    if len(alt.split()) < 8:
        return f"too short to say what the figure shows: {alt!r}"
    return None


def test_figure_cells_are_found():
    """The detection below is not vacuous: the chapters show figures, e.g. chapter 5's
    ``plot_diagnostics`` (a function of the notebook) shows one in each cell that calls it."""
    nb = nbformat.read(ROOT / "book" / "05_cifar10_table1.ipynb", as_version=4)
    cells = _figure_cells(nb)
    assert sum("plot_diagnostics(" in c.source for c in cells) >= 2
    assert sum(len(_figure_cells(nbformat.read(ROOT / f"{d}.ipynb", as_version=4))) for d in _chapters()) >= 20


def test_alt_problem_rejects_file_names_and_empty_text():
    assert _alt_problem(None) and _alt_problem("  ") and _alt_problem("../_images/4d28c0cf.png")
    assert _alt_problem("a plot")
    assert _alt_problem("Test accuracy against the round for FedAvg and FedNova on CIFAR-10") is None


@pytest.mark.parametrize("docname", _chapters())
def test_every_figure_cell_carries_alt_text(docname):
    """MyST-NB writes an image output with its file path as alt text (``<img alt="../_images/
    4d28….png">``): a screen reader reads out a hash. Every cell that shows a figure carries a
    description in its metadata, ``mystnb: {image: {alt: ...}}``, which MyST-NB puts on the image;
    one per figure, not a shared one."""
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    bad, alts = [], []
    for cell in _figure_cells(nb):
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
        why = _alt_problem(alt)
        if why:
            bad.append(f"cell {cell.source.splitlines()[0][:60]!r}: {why}")
        alts.append(alt)
    assert not bad, f"{docname}: figures without a usable alt text:\n" + "\n".join(bad)
    assert len(set(alts)) == len(alts), f"{docname}: two figures share one alt text"


@pytest.fixture(scope="module")
def pages() -> dict[str, object]:
    """docname -> parsed HTML of every chapter page."""
    return built_pages()


def test_built_images_have_alt_text(pages):
    """In the built pages every image of a page's content has a description as alt text, not its
    file path (MyST-NB's default) or nothing."""
    bad, seen = [], 0
    for docname, soup in pages.items():
        for img in (soup.find("article") or soup).find_all("img"):
            seen += 1
            why = _alt_problem(img.get("alt"))
            if why is None and img.get("alt", "").strip() == img.get("src", "").strip():
                why = "the image's path"
            if why:
                bad.append(f"{docname}: {img.get('src')}: {why}")
    assert seen >= 20, f"only {seen} images in the built chapters"
    assert not bad, "images without a usable alt text:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- tables

def test_table1_says_a_shared_deviation_once():
    """Chapter 5's Table 1 repeated "(not the paper's setup: bf16 autocast)" in every row with a
    result (903 px wide at a 1300-px window, the content column is ~692 px): what every result shares is
    now said once, in a note under the table; what only some rows have stays in those rows."""
    from fedlib.experiments import cifar10 as C

    rows = [dict(row="SGD", setting="E=2", method="FedAvg", mean=58.8, std=0.0, n_seeds=1, best=58.9,
                 seconds_per_run=144.0, devices=["GPU"], paper=60.68, paper_std=None, paper_status=None,
                 rerun=None, rerun_source="", deviations=["bf16 autocast", "width 0.5"]),
            dict(row="SGD", setting="E=2", method="FedNova", mean=66.5, std=0.0, n_seeds=1, best=66.6,
                 seconds_per_run=144.0, devices=["GPU"], paper=66.31, paper_std=None, paper_status=None,
                 rerun=None, rerun_source="", deviations=["bf16 autocast"]),
            dict(row="VR", setting="E~U(2,5)", method="SCAFFOLD", mean=None, std=None, n_seeds=0, best=None,
                 seconds_per_run=None, devices=[], paper=74.72, paper_std=None, paper_status=None,
                 rerun=None, rerun_source="", deviations=[])]
    assert C.shared_deviations(rows) == ["bf16 autocast"]  # the row without results does not count
    assert C.shared_deviations(rows[2:]) == [] and C.shared_deviations([]) == []
    text = C.format_summary_rows(rows, omit_deviations=C.shared_deviations(rows))
    assert [r[3] for r in text] == ["58.80 (not the paper's setup: width 0.5)", "66.50", "not yet run"]
    # by default (the CLI's `table1 --summary`) every row still says all of it
    assert C.format_summary_rows(rows)[1][3] == "66.50 (not the paper's setup: bf16 autocast)"

    nb = nbformat.read(ROOT / "book" / "05_cifar10_table1.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "C.SUMMARY_HEADERS" in c.source]
    assert "omit_deviations=shared" in cell.source and "shared_deviations(summary)" in cell.source


_REMARK = re.compile(r"\([^()]{12,}\)\s*$")


def test_no_table_column_repeats_a_remark_in_every_row(pages):
    """A remark that every row of a column carries (Table 1's "(not the paper's setup: bf16
    autocast)", 17 rows) widens the table and says nothing row by row: it belongs in a note."""
    bad = []
    for docname, soup in pages.items():
        for table in (soup.find("article") or soup).find_all("table"):
            body = [[td.get_text(" ", strip=True) for td in tr.find_all("td")] for tr in table.find_all("tr")]
            body = [r for r in body if r]
            for col in range(max((len(r) for r in body), default=0)):
                cells = [r[col] for r in body if col < len(r) and r[col] not in ("", "—", "not yet run")]
                remarks = {m.group(0) if (m := _REMARK.search(c)) else None for c in cells}
                if len(cells) >= 3 and len(remarks) == 1 and None not in remarks:
                    bad.append((docname, col, remarks.pop()))
    assert not bad, f"a remark repeated in every row of a column (say it once under the table): {bad}"

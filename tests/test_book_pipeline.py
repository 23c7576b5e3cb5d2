"""The book's sources and its build pipeline (scripts/build_book.py), without a browser.

* the notebooks under ``book/`` are committed clean (no outputs, no counts);
* every page of ``_toc.yml`` exists and every chapter has one ``parameters``
  cell defining ``profile`` and ``seed``;
* ``_config.yml`` keeps execution off and MathJax local;
* the build script executes with papermill from the book root, injects the
  profile, mirrors the tree, and fails on a failing ``assert`` (on a scratch
  book in a temporary directory, without rendering).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bookutil import build_script, require_book_module, toc_docnames
import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build_book.py"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf8"))




CHAPTERS = [d for d in toc_docnames() if (ROOT / f"{d}.ipynb").is_file()]
SOURCE_NOTEBOOKS = sorted(p for p in (ROOT / "book").rglob("*.ipynb")
                          if ".ipynb_checkpoints" not in p.parts)


def assigned_names(source: str) -> dict[str, ast.expr]:
    """Top-level ``name = value`` assignments of a code cell."""
    names = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node.value
    return names


# --------------------------------------------------------------------- TOC ---

def test_toc_is_a_flat_numbered_book():
    assert TOC["format"] == "jb-book"
    assert TOC["root"] == "book/intro"
    assert TOC.get("options", {}).get("numbered") is True
    assert "parts" not in TOC
    assert TOC["chapters"], "the TOC lists no chapter"


@pytest.mark.parametrize("docname", toc_docnames())
def test_toc_page_exists(docname):
    assert docname.startswith("book/"), "pages live under book/"
    found = [s for s in (".ipynb", ".md") if (ROOT / f"{docname}{s}").is_file()]
    assert len(found) == 1, f"{docname}: expected exactly one of .ipynb/.md, found {found}"
    if docname not in (TOC["root"], *REFERENCE_PAGES):
        assert found == [".ipynb"], f"chapter {docname} must be a notebook"


#: Pages of the TOC that are not chapters (Markdown, nothing to execute).
REFERENCE_PAGES = ("book/api",)


def test_api_reference_page_covers_the_public_modules():
    """book/api.md documents (autodoc) every public fedlib module: all of them but the private
    ones (a leading underscore) and the command line (``python -m fedlib ... --help`` is its
    documentation)."""
    import pkgutil

    import fedlib

    text = (ROOT / "book" / "api.md").read_text()
    documented = set(re.findall(r"\.\. automodule:: ([\w.]+)", text))
    wanted = {m.name for m in pkgutil.walk_packages(fedlib.__path__, "fedlib.")
              if not any(part.startswith("_") for part in m.name.split("."))
              and not m.name.startswith("fedlib.cli")}
    assert len(wanted) > 40
    assert wanted <= documented, sorted(wanted - documented)
    assert "book/api" in toc_docnames()


# --------------------------------------------------------- notebook sources ---

@pytest.mark.parametrize("path", SOURCE_NOTEBOOKS, ids=lambda p: p.name)
def test_sources_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {i}: committed outputs"
            assert cell.execution_count is None, f"{path.name} cell {i}: execution_count"
        assert "injected-parameters" not in cell.metadata.get("tags", []), \
            f"{path.name} cell {i}: papermill's injected cell was committed"
        assert "papermill" not in cell.metadata, f"{path.name} cell {i}: papermill metadata"
    assert "papermill" not in nb.metadata, f"{path.name}: executed by papermill, not clean"
    # nbformat.read fills in missing cell ids (with a warning): look at the file itself
    import json

    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), f"{path.name}: cells without a (unique) id"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_has_one_parameters_cell(docname):
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{docname}: {len(cells)} cells tagged 'parameters'"
    assert cells[0].cell_type == "code"
    names = assigned_names(cells[0].source)
    assert {"profile", "seed"} <= set(names), f"{docname}: parameters define {sorted(names)}"
    assert ast.literal_eval(names["profile"]) == "ci", "the default profile is 'ci'"
    assert isinstance(ast.literal_eval(names["seed"]), int)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_papermill_reads_every_parameter(docname):
    """`papermill --help-notebook` lists every parameter with its comment as help: one
    name per line, no '=' inside a comment (papermill skips such lines with a warning)."""
    require_book_module("papermill")
    from papermill.translators import PythonTranslator

    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    found = [p.name for p in PythonTranslator.inspect(cell)]
    assert found == list(assigned_names(cell.source)), docname


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_figures_follow_the_profile(docname):
    """Every ``save_figure`` call of a chapter passes ``profile=profile`` and ``seed=seed``: a ``ci``
    run then writes to the ignored ``figures/ci/``, a run under another seed to ``figures/<profile>-seed<k>/``,
    and only ``PROFILE=full make book`` replaces the committed figures (a ``ci`` build once overwrote them,
    and so did README's ``papermill ... -p profile full -p seed 3``, with seed 3's figures)."""
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    calls = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse("\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "save_figure":
                kw = {k.arg: k.value for k in node.keywords}
                calls.append(ast.unparse(node))
                assert isinstance(kw.get("profile"), ast.Name) and kw["profile"].id == "profile", \
                    f"{docname}: {ast.unparse(node)} must pass profile=profile"
                assert isinstance(kw.get("seed"), ast.Name) and kw["seed"].id == "seed", \
                    f"{docname}: {ast.unparse(node)} must pass seed=seed"
    assert calls, f"{docname}: draws no figure"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_starts_with_a_title(docname):
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), \
        f"{docname}: the first cell must be a '# Title' markdown cell"


# ------------------------------------------------------------------ config ---

def test_config_execution_is_off_and_toc_only():
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    assert CONFIG["only_build_toc_files"] is True


def test_config_mathjax_is_local():
    sphinx = CONFIG["sphinx"]["config"]
    path = sphinx["mathjax_path"]
    assert "://" not in path and not path.startswith("/"), path
    # A relative mathjax_path is resolved against _static/ of the HTML output,
    # which receives the contents of every html_static_path entry.
    assert any((ROOT / static / path).is_file() for static in sphinx["html_static_path"])
    # jupyter-book would load every *.js of a root-level _static/ on every page.
    assert not (ROOT / "_static").exists()


def test_config_fetches_nothing():
    sphinx = CONFIG["sphinx"]["config"]
    assert sphinx.get("intersphinx_mapping") == {}
    assert sphinx.get("nb_ipywidgets_js") == {}
    assert CONFIG.get("launch_buttons", {}).get("thebe") is False


def test_config_renders_markdown_outputs_with_tables():
    """The chapters' tables are text/markdown outputs; MyST-NB's default ("commonmark") has no tables
    and showed every one of them as a paragraph of pipes."""
    assert CONFIG["sphinx"]["config"].get("nb_render_markdown_format") in ("myst", "gfm")


def test_markdown_table_parses_as_one_table_even_with_pipes_in_cells():
    require_book_module("markdown_it")
    from markdown_it import MarkdownIt

    from fedlib.report import markdown_table

    text = markdown_table(["α", "max |Δw_i|"], [["a|b", "two\nlines"], [0.5, 3]])
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    types = [t.type for t in tokens]
    assert types.count("table_open") == 1 and types.count("th_open") == 2 and types.count("td_open") == 4
    cells = [t.content for t in tokens if t.type == "inline"]
    assert cells == ["α", "max |Δw_i|", "a|b", "two lines", "0.5", "3"]
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<th>max |Δw_i|</th>" in html and "<td>a|b</td>" in html


def test_build_script_finds_tables_left_as_text(tmp_path):
    """What render() checks after jupyter-book: a table shown as a paragraph of pipes is found (with
    "---" turned into an em dash on the way), a rendered table and prose with a pipe are not."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "bad.html").write_text(
        "<div>\n<p>| μ | loss |\n|—|—|\n| 0.01 | 1.15 |</p>\n</div>\n<p>| a | b |\n|---|:---:|\n| 1 | 2 |</p>\n")
    (tmp_path / "good.html").write_text("<table><tr><th>μ</th></tr></table>\n<p>| x | is a norm\nnext line</p>\n")
    assert build_script().unrendered_tables(tmp_path) == [("book/bad.html", "| μ | loss |"),
                                                           ("book/bad.html", "| a | b |")]


# ---------------------------------------------------------- build script ---

def _notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}"),
                nbformat.v4.new_code_cell('profile = "ci"\nseed = 0',
                                          metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _scratch_book(tmp_path: Path, *chapters: str) -> Path:
    """A book root under ``tmp_path`` with the project's ``_config.yml``, an intro page and a TOC of ``chapters``
    (notebook stems under ``book/``, written by the test with :func:`_notebook`); skips without papermill."""
    for module in ("papermill", "jupyter_client"):
        require_book_module(module)
    book = tmp_path / "scratch"
    (book / "book").mkdir(parents=True)
    shutil.copy2(ROOT / "_config.yml", book / "_config.yml")
    (book / "book" / "intro.md").write_text("# Scratch\n", encoding="utf8")
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   + "".join(f"  - file: book/{c}\n" for c in chapters), encoding="utf8")
    return book


def test_build_script_executes_in_root_and_fails_on_assert(tmp_path):
    """A scratch book: one passing and one failing chapter, executed but not rendered."""
    book = _scratch_book(tmp_path, "good", "bad")
    (book / "book" / "notes.txt").write_text("copied as is\n", encoding="utf8")
    _notebook(book / "book" / "good.ipynb",
              "import os, pathlib\n"
              "assert pathlib.Path(os.getcwd()).resolve() == pathlib.Path('_toc.yml').resolve().parent\n"
              "assert (pathlib.Path('book') / 'good.ipynb').is_file()  # cwd = book root\n"
              "pathlib.Path('figures').mkdir(exist_ok=True)\n"
              "pathlib.Path('figures/f.txt').write_text(profile)\n"
              "pathlib.Path('figures/build.txt').write_text(os.environ['FEDLIB_BOOK_BUILD'])\n"
              "print('profile is', profile)")
    _notebook(book / "book" / "bad.ipynb", "assert profile == 'nope', 'chapter claim failed'")

    proc = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), "--root", str(book), "--profile", "full",
         "--no-render", "--jobs", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "AssertionError: chapter claim failed" in proc.stderr

    executed = book / "_build" / "executed"
    assert (executed / "_config.yml").is_file() and (executed / "_toc.yml").is_file()
    assert (executed / "book" / "intro.md").is_file()
    assert (executed / "book" / "notes.txt").is_file()
    assert (executed / "figures" / "f.txt").read_text() == "full"
    # the kernels see the build's profile: save_figure writes committed figures only in the full build
    assert (executed / "figures" / "build.txt").read_text() == "full"

    good = nbformat.read(executed / "book" / "good.ipynb", as_version=4)
    injected = [c for c in good.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "profile = \"full\"" in injected[0].source
    assert "profile is full" in "".join(o.get("text", "") for c in good.cells
                                        if c.cell_type == "code" for o in c.outputs)

    times = json.loads((book / "_build" / "chapter_times.json").read_text())
    assert times["parameters"] == {"profile": "full"}
    assert set(times["seconds"]) == {"book/good.ipynb", "book/bad.ipynb"}
    assert times["failed"] == ["book/bad.ipynb"]
    assert times["jobs"] == 2 and 0 < times["wall_seconds"]
    assert not (book / "_build" / "html").exists(), "a failed execution must not render"


def test_build_script_runs_the_chapters_over_encrypted_sockets(tmp_path):
    """The chapters' kernels get CurveZMQ keys from their manager (``kernel_config``: jupyter_client's
    ``transport_encryption = "auto"``), so ipykernel 7.4 says nothing about its transport and the chapter runs as
    before. Was: every chapter printed "[IPKernelApp] WARNING | Kernel is running over TCP without encryption. ..."
    into the build's log (10 lines for ``make book``), its kernel unencrypted (``curve_secretkey`` None)."""
    book = _scratch_book(tmp_path, "kernel")
    _notebook(book / "book" / "kernel.ipynb",
              "from ipykernel.kernelapp import IPKernelApp\n"
              "app = IPKernelApp.instance()\n"
              "print('transport', app.transport, 'encrypted', app.curve_secretkey is not None, 'profile', profile)")
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(book), "--profile", "ci", "--no-render",
                           "--jobs", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "without encryption" not in proc.stdout + proc.stderr
    executed = nbformat.read(book / "_build" / "executed" / "book" / "kernel.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "transport tcp encrypted True profile ci" in printed
    assert build_script().kernel_config().KernelManager.transport_encryption == "auto"


def test_build_script_runs_with_a_home_folder_that_cannot_be_written(tmp_path):
    """``HOME`` naming no writable folder (``/nonexistent`` in a container, a read-only home; here a file, which
    no user can make folders under): the build gives IPython, Jupyter's connection files and Matplotlib folders
    under ``_build/home/``, says so, and the chapter's output is what it prints. Before, Matplotlib's "mkdir -p
    failed ... Matplotlib created a temporary cache directory ..." lines went into the chapter's output (the
    rendered page) and IPython's "not a writable location" warning into the log; with a home that looks writable
    but is not (``HOME=/proc`` as root) the build stopped before the first chapter with IPython's traceback
    ``FileNotFoundError: ... '/proc/.ipython'``."""
    import os

    book = _scratch_book(tmp_path, "plot")
    _notebook(book / "book" / "plot.ipynb",
              "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport fedlib.plotting\n"
              "plt.plot([0, 1])\nprint('plotted', profile)")
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "JUPYTER_", "IPYTHON", "MPL"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(book), "--profile", "ci", "--no-render",
                           "--jobs", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    executed = nbformat.read(book / "_build" / "executed" / "book" / "plot.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert printed == "plotted ci\n", printed
    assert f"note: the home folder ({home}) cannot be written: IPYTHONDIR={book / '_build' / 'home' / 'ipython'}" \
        in proc.stderr
    assert "not a writable location" not in proc.stderr


def test_build_script_reexecutes_only_the_chapters_named(tmp_path):
    """``--chapters`` executes the chapters it names (by number, stem or path) and keeps the others' executed copies,
    which must come from a passing build of the same parameters; a name that matches no chapter, a build of another
    profile to keep from, or no earlier build at all is refused before anything runs (exit 2). Before
    (2026-12-05) re-executing one chapter for the book meant the whole build (3 min in the ci profile, 19 min
    in the full one) or a papermill run whose output the book never showed."""
    book = _scratch_book(tmp_path, "01_first", "02_second")
    for name in ("01_first", "02_second"):
        _notebook(book / "book" / f"{name}.ipynb",
                  f"import pathlib\nruns = pathlib.Path('runs.txt')\nruns.write_text(runs.read_text() + '{name} ' "
                  "if runs.exists() else '" + name + " ')\nprint(profile, len(runs.read_text().split()))")

    def build(*args):
        return subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(book), "--no-render", "--jobs", "1",
                               *args], capture_output=True, text=True, timeout=300)

    first = book / "_build" / "executed" / "book" / "01_first.ipynb"
    proc = build("--chapters", "2")
    assert proc.returncode == 2 and "build the whole book with these parameters first" in proc.stderr
    assert not (book / "runs.txt").exists()
    assert build("--profile", "ci").returncode == 0
    kept = first.read_bytes()
    proc = build("--profile", "ci", "--chapters", "02")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((book / "runs.txt").read_text().split()) == ["01_first", "02_second", "02_second"]
    assert first.read_bytes() == kept   # chapter 1 as the full build left it
    second = nbformat.read(book / "_build" / "executed" / "book" / "02_second.ipynb", as_version=4)
    assert "ci 3" in "".join(o.get("text", "") for c in second.cells if c.cell_type == "code" for o in c.outputs)
    times = json.loads((book / "_build" / "chapter_times.json").read_text())
    assert list(times["seconds"]) == ["book/01_first.ipynb", "book/02_second.ipynb"]
    assert times["executed"] == ["book/02_second.ipynb"] and times["failed"] == []
    assert build("--chapters", "book/02_second.ipynb", "01_first").returncode == 0   # both, by path and stem
    assert len((book / "runs.txt").read_text().split()) == 5
    for args, message in ((("--profile", "full", "--chapters", "2"), "the book would mix them"),
                          (("--chapters", "3"), "names no chapter; the chapters are: 01_first, 02_second"),
                          (("--chapters", "2", "--render-only"), "does not go with --render-only")):
        proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(book), *args], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert len((book / "runs.txt").read_text().split()) == 5   # nothing ran


def test_intro_says_what_every_chapter_checks():
    """The intro's "What is checked where" table has one row per chapter, in TOC order."""
    text = (ROOT / "book" / "intro.md").read_text()
    section = text.split("## What is checked where", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"^\| *\d+ *\|", line)]
    assert [int(r.split("|")[1]) for r in rows] == list(range(1, len(CHAPTERS) + 1)), rows


def test_api_hook_turns_prose_entries_into_descriptions():
    from bookutil import autodoc_extension

    mod = autodoc_extension()
    doc = ["Intro : not a section.", "", "Parameters", "----------", "rounds : total number of rounds.",
           "    more about rounds.", "a, b : two at once.", "", "Returns", "-------", "x : kept as it is"]
    assert mod.prose_entries(doc) == ["Intro : not a section.", "", "Parameters", "----------", "rounds",
                                      "    total number of rounds.", "    more about rounds.", "a, b",
                                      "    two at once.", "", "Returns", "-------", "x : kept as it is"]


def test_build_script_runs_the_longest_chapters_first(tmp_path):
    """With an earlier run's timings for the same parameters, the slowest chapters start first
    (a shorter wall time with several jobs); without them, or for other parameters, the TOC order
    reversed (the later chapters are the longer ones)."""
    bb = build_script()
    layout = bb.Layout(tmp_path)
    names = ["book/a.ipynb", "book/b.ipynb", "book/c.ipynb"]
    assert bb.execution_order(layout, names, {"profile": "ci"}) == names[::-1]  # no timings yet
    layout.times_json.parent.mkdir(parents=True)
    layout.times_json.write_text(json.dumps({"parameters": {"profile": "ci"},
                                             "seconds": {"book/a.ipynb": 1.0, "book/c.ipynb": 9.0}}))
    assert bb.execution_order(layout, names, {"profile": "ci"}) == ["book/c.ipynb", "book/a.ipynb", "book/b.ipynb"]
    assert bb.execution_order(layout, names, {"profile": "full"}) == names[::-1]
    # a timing file that is not what this script writes is only a lost hint, never a crash
    for text in ("[1, 2]", '{"parameters": {"profile": "ci"}, "seconds": [9]}',
                 '{"parameters": {"profile": "ci"}, "seconds": {"book/a.ipynb": "slow"}}',
                 '{"parameters": {"profile": "ci"}, "seconds": {"book/a.ipynb": NaN}}',
                 '{"parameters": {"profile": "ci"}, "seconds": {"book/a.ipynb": true}}',
                 '{"parameters": {"profile": "ci"}, "seconds": {', "[" * 100000):
        layout.times_json.write_text(text)
        assert bb.execution_order(layout, names, {"profile": "ci"}) == names[::-1], text[:60]
    bb.atomic_write(layout.times_json, '{"x": 1}\n')
    assert layout.times_json.read_text() == '{"x": 1}\n'
    assert [p.name for p in layout.times_json.parent.iterdir()] == [layout.times_json.name]  # no temporary left
    with pytest.raises(SystemExit):
        bb.main(["--root", str(tmp_path), "--jobs", "0"])


def test_render_prints_jupyter_books_command_quoted_for_a_checkout_path_with_spaces(tmp_path, monkeypatch, capsys):
    """The ``$ jupyter-book build ...`` line render() prints is the command it runs, shell-quoted: in a checkout at
    '/tmp/My Projects/fednova book (copy)' it printed the paths bare (``" ".join``), a line that the shell splits
    at each space and refuses at the parenthesis when pasted. The command itself (a list) always ran."""
    import shlex

    bb = build_script()
    layout = bb.Layout(tmp_path / "My Projects" / "fednova book (copy)")
    ran = []
    monkeypatch.setattr(bb, "merge_streams_in_mirror", lambda layout: None)
    monkeypatch.setattr(bb.subprocess, "call", lambda cmd, cwd: ran.append(cmd) or 1)
    assert bb.render(layout) == 1
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("$ ")]
    assert len(ran) == 1 and len(printed) == 1
    assert shlex.split(printed[0][2:]) == ran[0]
    assert ran[0][1:3] == ["build", str(layout.executed)] and ran[0][ran[0].index("--path-output") + 1] == str(
        layout.root)

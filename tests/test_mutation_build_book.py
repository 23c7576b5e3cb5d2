"""Mutation-testing pass on ``scripts/build_book.py`` (loaded with ``bookutil.build_script()``): the merging
of consecutive prints in the executed notebooks. Each test pins behaviour that a surviving mutant changed; its
docstring names the mutant (the commit messages that added the tests say which mutant each kills).

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/plotting.py)
(pass described in tests/README.md, Mutation passes):
  PL1 save_figure's committed folder without $FEDLIB_BOOK_BUILD; PL2 ``if seed`` -> ``if seed is not None``; PL3
  '.' and '..' taken as names; PL4 '.PNG' taken; PL5 ``profile is not None`` -> ``profile`` in the seed folder.
  killed by the suite: PL1-PL4. equivalent: PL5 (a profile is None or matches ``[A-Za-z0-9_-]+``, so it is never
  an empty string: both tests agree).
"""


def test_merge_adjacent_streams_leaves_other_outputs_of_one_type_apart():
    """Two consecutive display_data outputs (two tables) are no prints: kept as they are (mutant: the
    ``== "stream"`` check dropped, which joined them, or failed on their missing text)."""
    import nbformat
    from bookutil import build_script

    table = lambda t: nbformat.v4.new_output("display_data", data={"text/markdown": t})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("show()", outputs=[table("| a |"), table("| b |")])])
    assert build_script().merge_adjacent_streams(nb) == 0
    assert [o.data["text/markdown"] for o in nb.cells[0].outputs] == ["| a |", "| b |"]


def test_merge_streams_in_mirror_rewrites_the_executed_notebooks_of_the_toc(tmp_path):
    """Every notebook the mirror's _toc.yml lists gets its consecutive prints joined on disk; a page
    in Markdown is left alone (mutant: the merged notebook not written back, survived)."""
    from types import SimpleNamespace

    import nbformat
    from bookutil import build_script

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: book/01_a\n", encoding="utf8")
    (tmp_path / "intro.md").write_text("# Intro\n", encoding="utf8")
    (tmp_path / "book").mkdir()
    stream = lambda text: nbformat.v4.new_output("stream", name="stdout", text=text)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("run()", outputs=[stream("a\n"), stream("b\n")])])
    nbformat.write(nb, tmp_path / "book" / "01_a.ipynb")
    build_script().merge_streams_in_mirror(SimpleNamespace(executed=tmp_path))
    outs = nbformat.read(tmp_path / "book" / "01_a.ipynb", as_version=4).cells[0].outputs
    assert [(o.output_type, o.text) for o in outs] == [("stream", "a\nb\n")]
    assert (tmp_path / "intro.md").read_text(encoding="utf8") == "# Intro\n"

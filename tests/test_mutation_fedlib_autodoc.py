"""Mutation-testing pass on the book's Sphinx extension ``book/_ext/fedlib_autodoc.py`` (the API page's
docstring hooks: ``chapter_links``, ``section_rubrics``, ``_chapters``), loaded with
``bookutil.autodoc_extension()``: each test pins behaviour that a surviving mutant changed; its docstring
names the mutant where it was one (the commit messages that added the tests say which mutant each kills)."""


def _autodoc():
    from bookutil import autodoc_extension

    return autodoc_extension()


CHAPTERS = {2: "/book/02_x", 3: "/book/03_x"}


def test_chapter_links_leave_text_inside_backquotes_alone():
    """Mutant: the odd-backquote check dropped (a link inside a ``literal`` breaks it)."""
    ext = _autodoc()
    assert ext.chapter_links(["``see chapter 2`` and chapter 2."], CHAPTERS) == [
        "``see chapter 2`` and :doc:`chapter 2 </book/02_x>`."]
    assert ext.chapter_links(["`f(chapter 2)` here"], CHAPTERS) == ["`f(chapter 2)` here"]


def test_chapter_links_follow_a_literal_across_the_lines_of_a_paragraph():
    """An inline literal may span lines (``train_clients(...,`` / ``dtype=...)``): what follows its
    closing backquotes is prose and is linked, what lies inside is not; a blank line ends the paragraph
    and any literal left open in it. Counting each line's backquotes alone took the closing run on the
    second line for an opening one (the API page's 'chapter 6 asserts it' lost its link)."""
    ext = _autodoc()
    lines = ["With ``train_clients(...,", "dtype=x)`` this is noise (chapter 2 asserts it)."]
    assert ext.chapter_links(lines, CHAPTERS) == [
        lines[0], "dtype=x)`` this is noise (:doc:`chapter 2 </book/02_x>` asserts it)."]
    inside = ["a ``literal that spans", "chapter 2 in it`` and chapter 3"]
    assert ext.chapter_links(inside, CHAPTERS) == [
        inside[0], "chapter 2 in it`` and :doc:`chapter 3 </book/03_x>`"]
    unclosed = ["an odd `` here", "", "chapter 2 of a new paragraph"]
    assert ext.chapter_links(unclosed, CHAPTERS)[2] == ":doc:`chapter 2 </book/02_x>` of a new paragraph"


def test_chapter_links_link_a_list_only_when_every_number_is_a_chapter():
    """Mutant: all -> any (a list with an unknown number was linked, or failed on it)."""
    ext = _autodoc()
    assert ext.chapter_links(["chapters 2 and 9"], CHAPTERS) == ["chapters 2 and 9"]
    assert ext.chapter_links(["chapters 2 and 3"], CHAPTERS) == [
        ":doc:`chapters 2 </book/02_x>` and :doc:`3 </book/03_x>`"]


def test_chapter_links_leave_doctest_continuation_lines_alone():
    """Mutant: only ``>>>`` lines treated as doctest (``...`` continuation lines were linked)."""
    ext = _autodoc()
    lines = [">>> f(1,", "...   chapter=2)  # chapter 2", "..."]
    assert ext.chapter_links(lines, CHAPTERS) == lines


def test_section_rubrics_underline_length_and_indentation():
    """An underline one shorter than its title counts (mutant: >= len(title)); one indented
    differently from its title does not (mutant: the indentation check dropped)."""
    ext = _autodoc()
    assert ext.section_rubrics(["A round", "------", "text"]) == [".. rubric:: A round", "", "text"]
    assert ext.section_rubrics(["A round", "-----"]) == ["A round", "-----"]
    assert ext.section_rubrics(["A round", "  -------"]) == ["A round", "  -------"]
    assert ext.section_rubrics(["  A round", "  -------"]) == ["  .. rubric:: A round", ""]


def test_chapters_maps_each_numbered_notebook_to_an_absolute_docname(tmp_path):
    """Mutant: a relative docname ("book/03_x") resolves against the API page's folder."""
    from types import SimpleNamespace

    ext = _autodoc()
    (tmp_path / "book").mkdir()
    for name in ("03_x.ipynb", "10_more.ipynb", "intro.ipynb", "4_short.ipynb", "05_y.md"):
        (tmp_path / "book" / name).write_text("{}")
    assert ext._chapters(SimpleNamespace(srcdir=str(tmp_path))) == {3: "/book/03_x", 10: "/book/10_more"}

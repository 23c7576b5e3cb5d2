"""Sphinx hooks for the API reference page (book/api.md).

* fedlib's docstrings write parameters as ``name : what it is`` (prose, not a type);
  napoleon would read the prose as a type and render it in parentheses. Before napoleon
  sees a docstring, such an entry of a Parameters / Attributes section becomes ``name``
  with the prose as its description.
* NamedTuple field accessors that only say "Alias for field number N" are left out (each
  class's docstring describes its fields).
* "chapter N" in a docstring (where a function is used, what checks it) becomes a link to that
  chapter (``:doc:``), so the reader of the API reference can follow it; in code (literal blocks,
  doctests, ````literals````) it is left alone.
* A titled section of a module docstring that napoleon does not read ("A round", "Extending
  fedlib", ...) becomes a rubric: a heading in the text that is no section of the page. As a
  section it became an entry of the page's numbered contents ("11.11.12. A round") among the
  modules; the contents list the modules only (``toc_object_entries: false`` in _config.yml
  leaves the functions and classes out).
"""
import re
from pathlib import Path

_SECTIONS = {"Parameters", "Attributes", "Other Parameters", "Keyword Arguments"}
_ENTRY = re.compile(r"^(?P<indent>\s*)(?P<names>[\w*]+(?:\s*,\s*[\w*]+)*)\s+:\s+(?P<text>\S.*)$")


def prose_entries(lines):
    """Rewrite ``name : text`` entries of numpy-style parameter sections as ``name`` + body."""
    out, section_indent, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        stripped = line.strip()
        if stripped and nxt.strip() and set(nxt.strip()) == {"-"} and len(nxt.strip()) >= len(stripped) - 1:
            indent = len(line) - len(line.lstrip())
            section_indent = indent if stripped in _SECTIONS else None
            out += [line, nxt]
            i += 2
            continue
        if section_indent is not None and stripped:
            indent = len(line) - len(line.lstrip())
            if indent < section_indent:
                section_indent = None
            elif indent == section_indent:
                m = _ENTRY.match(line)
                if m:
                    out += [m["indent"] + m["names"], m["indent"] + "    " + m["text"]]
                    i += 1
                    continue
        out.append(line)
        i += 1
    return out


_CHAPTER = re.compile(r"(?<![\w`<])(?P<word>[Cc]hapters?) (?P<num>\d{1,2})(?P<more>(?:(?:, | and |–)\d{1,2})*)(?!\d|[\w.]\d)")


_CODE_DIRECTIVE = re.compile(r"\.\. (code-block|code|sourcecode|parsed-literal|doctest|testcode)::")


def chapter_links(lines, chapters):
    """Turn ``chapter N`` (and ``chapters N and M``, ``N, M``, ``N–M``) into ``:doc:`` links.

    ``chapters`` maps a chapter number to its docname (e.g. ``{6: "/book/06_your_own_model"}``);
    numbers it does not know, literal blocks (after a line ending in ``::``, or a ``code-block``
    directive and its kin), doctest lines and
    text inside backquotes (also an inline literal that began on an earlier line of the paragraph)
    are left as they are."""
    out, literal_indent, open_quote = [], None, 0
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            open_quote = 0  # inline markup ends with its paragraph
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                out.append(line)
                continue
            literal_indent = None
        if stripped.startswith((">>>", "... ")) or stripped == "...":
            out.append(line)
            open_quote = 0
            continue

        def link(m, carry=open_quote, line=line):
            # inside ``literal``, `role`, :math:`...`: an odd number of backquote runs (each opens or closes
            # one) before the match, counting those of the paragraph's earlier lines
            if (carry + len(re.findall(r"`+", line[:m.start()]))) % 2:
                return m.group(0)
            nums = re.findall(r"\d{1,2}", m.group("num") + m.group("more"))
            if not all(int(n) in chapters for n in nums):
                return m.group(0)
            seps = re.findall(r", | and |–", m.group("more"))
            first = f":doc:`{m.group('word')} {nums[0]} <{chapters[int(nums[0])]}>`"
            rest = "".join(f"{sep}:doc:`{n} <{chapters[int(n)]}>`" for sep, n in zip(seps, nums[1:]))
            return first + rest

        out.append(_CHAPTER.sub(link, line))
        open_quote = (open_quote + len(re.findall(r"`+", line))) % 2
        if stripped.endswith("::") or _CODE_DIRECTIVE.match(stripped):
            literal_indent = indent
    return out


_ADORNMENT = re.compile(r"""^([=\-`:'"~^_*+#<>])\1*$""")


def section_rubrics(lines, keep=frozenset()):
    """Turn each ``Title`` + underline of a docstring into ``.. rubric:: Title``, except the
    titles in ``keep`` (lower case: the sections napoleon turns into fields, "parameters",
    "example", ...).

    Only an underline at the title's indentation, of one adornment character and at least as
    long as the title less one, counts (as in :func:`prose_entries`)."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        title, under = line.strip(), nxt.strip()
        indent = len(line) - len(line.lstrip())
        if (title and under and _ADORNMENT.match(under) and len(under) >= len(title) - 1
                and len(nxt) - len(nxt.lstrip()) == indent and title.lower() not in keep
                and not _ADORNMENT.match(title)):
            out += [line[:indent] + ".. rubric:: " + title, ""]
            i += 2
            continue
        out.append(line)
        i += 1
    return out


def _napoleon_sections(app) -> frozenset:
    """The section titles napoleon reads (its own and ``napoleon_custom_sections``)."""
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    return frozenset(name.lower() for name in NumpyDocstring("", app.config)._sections)


def _chapters(app) -> dict:
    """Chapter number -> absolute docname, from the ``NN_*`` notebooks next to this page."""
    found = {}
    for path in sorted(Path(app.srcdir, "book").glob("[0-9][0-9]_*.ipynb")):
        found[int(path.name[:2])] = f"/book/{path.stem}"
    return found


def _process(app, what, name, obj, options, lines):
    if what == "module":
        lines[:] = section_rubrics(lines, _napoleon_sections(app))
    lines[:] = chapter_links(prose_entries(lines), _chapters(app))


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number"):  # property or _collections._tuplegetter
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _process, priority=100)  # before napoleon (500)
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

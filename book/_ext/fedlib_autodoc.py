"""Sphinx hooks for the API reference page (book/api.md).

* fedlib's docstrings write parameters as ``name : what it is`` (prose, not a type);
  napoleon would read the prose as a type and render it in parentheses. Before napoleon
  sees a docstring, such an entry of a Parameters / Attributes section becomes ``name``
  with the prose as its description.
* NamedTuple field accessors that only say "Alias for field number N" are left out (each
  class's docstring describes its fields).
"""
import re

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


def _process(app, what, name, obj, options, lines):
    lines[:] = prose_entries(lines)


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number"):  # property or _collections._tuplegetter
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _process, priority=100)  # before napoleon (500)
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

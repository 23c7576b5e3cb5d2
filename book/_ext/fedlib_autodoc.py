"""Sphinx hook for the API reference page (book/api.md): leave out the NamedTuple field
accessors that only say "Alias for field number N" (each class's docstring describes its
fields)."""


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number"):  # property or _collections._tuplegetter
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

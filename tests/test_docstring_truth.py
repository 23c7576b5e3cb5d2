"""Do the docstrings tell the truth? Each claim a public docstring makes — a formula, a paper
equation, a closed form, what the API page shows — checked against an independent
computation (numpy, :mod:`fractions`) or against what the code does, not against the code's own
output echoed back."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the API page
def _autodoc_modules():
    """The modules book/api.md renders with ``:members:``."""
    text = (ROOT / "book" / "api.md").read_text()
    return sorted(set(re.findall(r"\.\. automodule:: ([\w.]+)\n\s*:members:", text)))


def _attribute_docs(name):
    """Names of the module-level assignments with a ``#:`` comment (or a docstring after them),
    the only data autodoc shows without ``:undoc-members:``."""
    from sphinx.pycode import ModuleAnalyzer

    analyzer = ModuleAnalyzer.for_module(name)
    analyzer.analyze()
    return {attr for (_, attr) in analyzer.attr_docs}


def test_api_page_shows_every_exported_name():
    """``automodule :members:`` (no ``:undoc-members:``) lists a module's ``__all__`` — or its public
    names when it has none — and silently drops every function or class without a docstring and
    every constant without a ``#:`` comment: such a name is exported but absent from book/api.md."""
    missing = []
    modules = _autodoc_modules()
    assert len(modules) > 30
    for name in modules:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            exported = [k for k, v in vars(module).items()
                        if not k.startswith("_") and getattr(v, "__module__", None) == name]
        documented_data = _attribute_docs(name)
        for attr in exported:
            value = getattr(module, attr)
            if inspect.isfunction(value) or inspect.isclass(value):
                if not inspect.getdoc(value):
                    missing.append(f"{name}.{attr} (no docstring)")
            elif attr not in documented_data and getattr(value, "__module__", name) == name:
                missing.append(f"{name}.{attr} (constant without a #: comment)")
    assert not missing, "exported but not on the API page: " + ", ".join(missing)


def test_public_functions_and_classes_are_exported():
    """A module with ``__all__`` shows only those names on the API page: a public (no underscore)
    function or class defined there but left out of ``__all__`` is documented nowhere."""
    left_out = []
    for name in _autodoc_modules():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        for attr, value in vars(module).items():
            if attr.startswith("_") or getattr(value, "__module__", None) != name:
                continue
            if (inspect.isfunction(value) or inspect.isclass(value)) and attr not in exported:
                left_out.append(f"{name}.{attr}")
    assert not left_out, "public but not in __all__ (so not on the API page): " + ", ".join(left_out)

"""Shared by the book tests: scripts/build_book.py loaded as a module (the TOC walk lives there, once),
and the built book as the tests find it (``make book`` writes ``_build/html``; a missing build skips a
test locally and fails it in CI, ``CI=true``)."""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build_book.py"
HTML_DIR = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(reason: str) -> None:
    """Skip locally, fail in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required)")
    pytest.skip(reason)


def require_book_module(name: str) -> None:
    """Skip locally (fail in CI) without ``name``, a module of the ``book`` extra (sphinx, IPython,
    markdown_it, jupyter_client, papermill): ``make test`` installs it, ``pip install -e '.[test]'`` alone
    does not."""
    if importlib.util.find_spec(name) is None:
        unavailable(f"needs {name}, which the book extra installs (pip install -e '.[book,test]')")


@functools.lru_cache(maxsize=1)
def build_script():
    spec = importlib.util.spec_from_file_location("build_book", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def book_extension(name: str):
    """A fresh copy of the book's local Sphinx extension ``book/_ext/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "book" / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def autodoc_extension():
    """A fresh copy of the book's Sphinx extension ``book/_ext/fedlib_autodoc.py`` (the API page's docstring hooks)."""
    return book_extension("fedlib_autodoc")


def toc_docnames() -> list[str]:
    """Every ``file:`` of ``_toc.yml``, root first."""
    return build_script().toc_docnames(ROOT / "_toc.yml")


def built_pages() -> dict:
    """docname -> parsed HTML (BeautifulSoup) of every page of the TOC in the built book."""
    if not (HTML_DIR / "index.html").is_file():
        unavailable(f"{HTML_DIR}/index.html missing: run `make book` first")
    try:
        from bs4 import BeautifulSoup
    except ImportError:  # a dependency of jupyter-book's theme; pinned in constraints.txt
        unavailable("beautifulsoup4 is not installed")
    out = {}
    for docname in toc_docnames():
        path = HTML_DIR / f"{docname}.html"
        assert path.is_file(), f"{path} missing from the build"
        out[docname] = BeautifulSoup(path.read_text(encoding="utf8"), "html.parser")
    return out

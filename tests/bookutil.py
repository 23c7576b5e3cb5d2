"""Shared by the book tests: scripts/build_book.py loaded as a module (the TOC walk lives there, once)."""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build_book.py"


@functools.lru_cache(maxsize=1)
def build_script():
    spec = importlib.util.spec_from_file_location("build_book", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def toc_docnames() -> list[str]:
    """Every ``file:`` of ``_toc.yml``, root first."""
    return build_script().toc_docnames(ROOT / "_toc.yml")

"""Small display helpers for the book's chapters (tables as Markdown)."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

__all__ = ["markdown_table", "fmt"]


def fmt(value: Any, spec: str = ".3g") -> str:
    """Format numbers with ``spec`` (floats) and leave everything else as ``str``: a string is
    kept as it is, even one that reads as a number (``"0.01"`` stays ``"0.01"``).

    >>> fmt(0.01, ".4f"), fmt("0.01", ".4f"), fmt(3, ".4f"), fmt(np.int64(12345)), fmt(None)
    ('0.0100', '0.01', '3', '12345', 'None')
    """
    if isinstance(value, (np.bool_, bool)):
        return str(bool(value))
    if isinstance(value, (numbers.Integral, str)):  # int and numpy integers alike
        return str(value)
    try:
        return format(float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], spec: str = ".3g") -> str:
    """A Markdown (MyST) table; numbers are formatted with ``spec``. A ``|`` inside a cell is
    escaped (``\\|``) and a line break becomes a space, so a cell never splits the table.

    >>> print(markdown_table(["a", "b"], [["x", 0.5]]))
    | a | b |
    |---|---|
    | x | 0.5 |
    """
    if len(header) == 0:  # "|  |" and a separator of no columns: not a table
        raise ValueError("header: a table needs at least one column")
    if any(len(r) != len(header) for r in rows):
        raise ValueError("every row must have as many cells as the header")

    def cell(text: str) -> str:
        return " ".join(text.splitlines()).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(str(h)) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(fmt(v, spec)) for v in r) + " |" for r in rows]
    return "\n".join(lines)

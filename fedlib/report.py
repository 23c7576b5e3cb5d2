"""Small display helpers for the book's chapters (tables as Markdown).

Used by chapters 1, 2, 3, 4, 5, 6, 7, 8, 9 and 10.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from ._validate import a_type

__all__ = ["markdown_table", "transposed_markdown_table", "fmt", "plus_minus"]


def _formats(probe: Any, spec: Any) -> bool:
    try:
        format(probe, spec)
    except (TypeError, ValueError):
        return False
    return True


def fmt(value: Any, spec: str = ".3g") -> str:
    """Format numbers with ``spec`` (floats) and leave everything else as ``str``: a string is
    kept as it is, even one that reads as a number (``"0.01"`` stays ``"0.01"``).

    ``value`` is any object; ``spec`` a format spec for floats (default ``".3g"``).

    >>> fmt(0.01, ".4f"), fmt("0.01", ".4f"), fmt(3, ".4f"), fmt(np.int64(12345)), fmt(None)
    ('0.0100', '0.01', '3', '12345', 'None')

    A 0-d numpy array or torch tensor prints as the scalar it holds (an integer as an integer):

    >>> fmt(np.array(12345)), fmt(np.array(0.5), ".2f"), fmt(np.array(True))
    ('12345', '0.50', 'True')

    A complex number keeps both parts, each formatted with ``spec``:

    >>> fmt(np.complex128(0.5 + 2j), ".2f"), fmt(1j)
    ('0.50+2.00j', '0+1j')

    A ``spec`` that formats neither a float nor a string is an error, not a silent ``str``:

    >>> fmt(0.01, ".4 f")
    Traceback (most recent call last):
    ...
    ValueError: spec must be a format spec of floats (e.g. '.3g') or strings ('s'), got '.4 f'
    """
    if not any(_formats(probe, spec) for probe in (0.0, "")):  # "s" is for pre-formatted cells: floats as str
        raise ValueError(f"spec must be a format spec of floats (e.g. '.3g') or strings ('s'), got {spec!r}")
    if _zero_d_integer_or_complex(value):  # printed through float(value): 12345 was '1.23e+04', True was '1'
        value = value.item()
    if isinstance(value, (np.bool_, bool)):
        return str(bool(value))
    if isinstance(value, (numbers.Integral, str)):  # int and numpy integers alike
        return str(value)
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        # complex, np.complex64/128 alike: float() kept only the real part of numpy's (with a ComplexWarning)
        try:
            return format(complex(value), spec)
        except (TypeError, ValueError):
            return str(value)
    try:
        return format(float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def _zero_d_integer_or_complex(x: Any) -> bool:
    """``x`` is a 0-d numpy array or torch tensor of integers, bools or complex numbers, which :func:`fmt` prints as
    the Python int, bool or complex it holds (``.item()``), as it prints ``np.int64``, ``np.bool_`` and
    ``np.complex128``; a 0-d object array as the object it holds."""
    if isinstance(x, np.ndarray):  # an object array too: np.array(10**21, dtype=object) printed as '1e+21'
        return x.ndim == 0 and x.dtype.kind in "biucO"
    return (hasattr(x, "detach") and getattr(x, "ndim", None) == 0 and hasattr(x, "is_floating_point")
            and not x.is_floating_point())


def plus_minus(value: Any, error: Any, spec: str = ".3g") -> str:
    """``value ± error``, both formatted with ``spec`` (:func:`fmt`): one table cell instead of a
    column of values and a column of their errors, which a wide table could not spare.

    >>> plus_minus(0.2637, 0.02213, ".4g"), plus_minus(0.0975, 0.0179)
    ('0.2637 ± 0.02213', '0.0975 ± 0.0179')

    A zero error prints without a sign, whichever zero it is (``-0.0`` too):

    >>> plus_minus(1, -0.0), plus_minus(0.5, np.float32(-0.0), ".2f")
    ('1 ± 0', '0.50 ± 0.00')

    A value or error that is not finite would print ``nan ± 0.1``; it is refused by name:

    >>> plus_minus(float("nan"), 0.1)
    Traceback (most recent call last):
    ...
    ValueError: value: plus_minus needs a finite number, got nan
    """
    if isinstance(error, (bool, np.bool_)):
        raise ValueError(f"error: a standard error or deviation is a number >= 0, got the bool {error!r}")
    number = _as_number(error)
    if number is not None and not number >= 0:  # negative or NaN
        raise ValueError(f"error: a standard error or deviation is >= 0, got {error!r}")
    for name, x in (("value", _as_number(value)), ("error", number)):
        if x is not None and not math.isfinite(x):
            raise ValueError(f"{name}: plus_minus needs a finite number, got {x!r}")
    if number == 0 and math.copysign(1.0, number) < 0:  # -0.0 printed "± -0": a spread has no sign
        error = -error  # the same type (a numpy float, a tensor) as +0
    return f"{fmt(value, spec)} ± {fmt(error, spec)}"


def _as_number(x: Any) -> Any:
    """``float(x)`` for what :func:`fmt` prints as a number (also a 0-d torch tensor or numpy array, which are
    no ``numbers.Real``); ``None`` for a string (printed as it is), a bool and anything ``float`` refuses."""
    if isinstance(x, (str, bool, np.bool_)):
        return None
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float's range, printed as it is
        return None


def _cells(header: Any, rows: Any) -> tuple[list, list]:
    """``header`` and ``rows`` as lists (each row a list), read once: a generator or ``zip`` of rows was used up
    by the check that every row has as many cells as the header, and the table came out without rows."""
    if isinstance(header, (str, bytes)):  # list("ab") gave one column per character
        raise ValueError(f"header must be a sequence of column names, got {a_type(header)} ({header!r}); one "
                         f"column: [{header!r}]")
    try:
        header = list(header)
    except TypeError:
        raise ValueError(f"header must be a sequence of column names, got {type(header).__name__}") from None
    if isinstance(rows, (str, bytes, Mapping)):
        raise ValueError(f"rows must be a sequence of rows, each a sequence of cells, got {a_type(rows)}")
    try:
        rows = list(rows)
    except TypeError:
        raise ValueError(f"rows must be a sequence of rows, each a sequence of cells, got {type(rows).__name__}") \
            from None
    out = []
    for k, r in enumerate(rows):  # list() of a dict gave its keys, of a str its characters: cells that were never given
        if isinstance(r, Mapping):
            raise ValueError(f"rows[{k}] is {a_type(r)}: give its cells in the header's order, e.g. "
                             "[row[name] for name in header]")
        if isinstance(r, (str, bytes)):
            raise ValueError(f"rows[{k}] is {a_type(r)} ({r!r}): a row is a sequence of cells (one cell: "
                             f"[{r!r}])")
        try:
            out.append(list(r))
        except TypeError:
            raise ValueError(f"rows must be a sequence of rows, each a sequence of cells, got rows[{k}] = {r!r}") \
                from None
    return header, out


def _check_row_lengths(header: list, rows: list) -> None:
    """A ``ValueError`` naming the first row with fewer or more cells than the header."""
    for k, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"rows[{k}] has {len(row)} cells, the header {len(header)}: every row must have as many "
                             "cells as the header")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], spec: str = ".3g") -> str:
    """A Markdown (MyST) table; numbers are formatted with ``spec``. A ``|`` inside a cell is
    escaped (``\\|``) and a line break becomes a space, so a cell never splits the table.

    ``header``, ``rows`` and each row may be any iterable (a generator, ``zip(...)``): each is read once.

    >>> print(markdown_table(["a", "b"], [["x", 0.5]]))
    | a | b |
    |---|---|
    | x | 0.5 |
    """
    header, rows = _cells(header, rows)
    if len(header) == 0:  # "|  |" and a separator of no columns: not a table
        raise ValueError("header: a table needs at least one column")
    _check_row_lengths(header, rows)

    def cell(text: str) -> str:
        return " ".join(text.splitlines()).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(str(h)) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(fmt(v, spec)) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def transposed_markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], spec: str = ".3g") -> str:
    """:func:`markdown_table` of the same cells with rows and columns swapped: row ``k`` becomes
    column ``k + 1``, the header the first column. For a few rows of many numeric columns (a sweep
    over three values of :math:`T`, say), which are too wide for the page as rows; the first
    column's entries head the columns (the header's first entry above them). The header is printed
    as given (``str``), as :func:`markdown_table` prints its header: ``spec`` is for the cells.

    >>> print(transposed_markdown_table(["T", "error"], [[100, 0.5], [400, 0.25]]))
    | T | 100 | 400 |
    |---|---|---|
    | error | 0.5 | 0.25 |
    """
    header, rows = _cells(header, rows)
    if len(header) == 0:
        raise ValueError("header: a table needs at least one column")
    if len(rows) == 0:
        raise ValueError("rows: a transposed table needs at least one row (its columns)")
    _check_row_lengths(header, rows)
    columns = [[r[j] for r in rows] for j in range(len(header))]
    return markdown_table([header[0], *(fmt(v, spec) for v in columns[0])], [[str(name), *values] for name, values in zip(header[1:], columns[1:])],
                          spec)

"""fedlib.report's helpers that keep the chapters' tables inside the page's content column (see
tests/test_browser.py::test_tables_fit_the_content_column): ``plus_minus`` puts a value and its
standard error in one cell, ``transposed_markdown_table`` lays a few rows of many columns out as
columns (chapter 8's consistency sweep: one column per T)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib.report import markdown_table, plus_minus, transposed_markdown_table


def test_plus_minus_formats_both_numbers_with_the_spec():
    assert plus_minus(0.2637, 0.02213, ".4g") == "0.2637 ± 0.02213"
    assert plus_minus(np.float64(0.0975123), np.float32(0.0179), ".3g") == "0.0975 ± 0.0179"
    assert plus_minus(3, 0) == "3 ± 0"  # integers as they are (fmt)


@pytest.mark.parametrize("error", [-1e-9, -2, math.nan, np.float64("nan")])
def test_plus_minus_refuses_a_negative_or_nan_error(error):
    with pytest.raises(ValueError, match="standard error or deviation"):
        plus_minus(1.0, error)


def test_transposed_table_swaps_rows_and_columns():
    header = ["T", "η", "distance"]
    rows = [[100, 0.0388888, 0.15], [400, 0.0194444, 0.0861]]
    lines = transposed_markdown_table(header, rows).splitlines()
    assert lines == ["| T | 100 | 400 |", "|---|---|---|", "| η | 0.0389 | 0.0194 |", "| distance | 0.15 | 0.0861 |"]
    # the same cells as the untransposed table, read by column
    flat = [line.strip("|").split(" | ") for line in markdown_table(header, rows).splitlines()]
    cells = [[c.strip() for c in line] for line in flat]
    assert [[cells[0][j]] + [cells[i][j] for i in (2, 3)] for j in range(3)] == \
        [[c.strip() for c in line.strip("|").split(" | ")] for line in lines if not line.startswith("|-")]


def test_transposed_table_formats_the_column_heads_with_the_spec():
    assert transposed_markdown_table(["η", "x"], [[0.123456, 1]], spec=".2g").splitlines()[0] == "| η | 0.12 |"


def test_transposed_table_refuses_bad_shapes():
    with pytest.raises(ValueError, match="at least one column"):
        transposed_markdown_table([], [])
    with pytest.raises(ValueError, match="at least one row"):
        transposed_markdown_table(["T", "x"], [])
    with pytest.raises(ValueError, match="as many cells as the header"):
        transposed_markdown_table(["T", "x"], [[1, 2], [3]])

"""fedlib.report's helpers that keep the chapters' tables inside the page's content column (see
tests/test_browser.py::test_tables_fit_the_content_column): ``plus_minus`` puts a value and its
standard error in one cell, ``transposed_markdown_table`` lays a few rows of many columns out as
columns (chapter 8's consistency sweep: one column per T). Non-finite numbers and format specs that
format nothing are refused."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

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


def test_a_row_of_another_length_is_named():
    """The refusal names the first row whose length differs from the header's, with both counts. Before
    (2026-12-05) it said only 'every row must have as many cells as the header'; chapter 2's own copy of
    markdown_table in fedlib.experiments.quadratic named the row, and is now this one."""
    for table in (markdown_table, transposed_markdown_table):
        with pytest.raises(ValueError, match=r"^rows\[1\] has 3 cells, the header 2: every row must have as many"):
            table(["a", "b"], [[1, 2], [1, 2, 3], [1]])
    with pytest.raises(ValueError, match=r"^rows\[0\] has 1 cells, the header 2"):
        markdown_table(["a", "b"], [[1]])
    # chapter 2's tables: numbers by the spec, integers and strings as they are
    assert markdown_table(["a", "b"], [[1, 0.123456], ["x", 2.0]], spec=".4g") == \
        "| a | b |\n|---|---|\n| 1 | 0.1235 |\n| x | 2 |"


# ------------------------------------------------------------- plus_minus of NaN / inf, the transposed table's header
@pytest.mark.parametrize("value, error, name, shown", [(float("nan"), 0.1, "value", "nan"),
                                                       (float("inf"), 0.1, "value", "inf"),
                                                       (np.float64("-inf"), 0.0, "value", "-inf"),
                                                       (torch.tensor(float("nan")), 0.1, "value", "nan"),
                                                       (0.5, float("inf"), "error", "inf"),
                                                       (0.5, np.float32("inf"), "error", "inf")])
def test_plus_minus_refuses_a_non_finite_number(value, error, name, shown):
    """Was: 'nan ± 0.1', 'inf ± 0.1', '-inf ± 0', '0.5 ± inf' (a NaN error was refused already)."""
    with pytest.raises(ValueError, match=rf"^{name}: plus_minus needs a finite number, got {shown}$"):
        plus_minus(value, error)


def test_plus_minus_still_prints_numbers_and_strings():
    assert plus_minus(0.2637, 0.02213, ".4g") == "0.2637 ± 0.02213"
    assert plus_minus(np.float32(0.5), 0, ".2f") == "0.50 ± 0"
    assert plus_minus("n/a", "—") == "n/a ± —"  # pre-formatted strings as they are
    assert plus_minus(3, np.int64(1)) == "3 ± 1"
    with pytest.raises(ValueError, match=r"^error: a standard error or deviation is >= 0, got nan$"):
        plus_minus(0.5, float("nan"))  # as before


def test_transposed_markdown_table_prints_the_header_as_given():
    """Was: a numeric header entry formatted with the cells' spec (0.123456 -> '0.123' with '.3g')."""
    table = transposed_markdown_table(["T", 0.123456, 2, np.float64(0.5)], [[100, 0.5, 1, 1.0], [400, 0.25, 2, 3.0]])
    assert table.splitlines() == ["| T | 100 | 400 |", "|---|---|---|", "| 0.123456 | 0.5 | 0.25 |",
                                  "| 2 | 1 | 2 |", "| 0.5 | 1 | 3 |"]
    # the header of markdown_table itself, printed as str: the same
    assert transposed_markdown_table(["T", "error"], [[100, 0.5]], ".2f").splitlines()[2] == "| error | 0.50 |"


# --------------------------------------------------------------------------- a format spec that formats nothing
@pytest.mark.parametrize("spec", ["bogus", ".4 f", 3, None])
def test_fmt_refuses_a_spec_that_formats_nothing(spec):
    """Was: format(0.01, spec) raised and fmt fell back to str(value), so a typo in a table's spec
    printed every number unformatted (fmt(0.0123456, "bogus") == "0.0123456", markdown_table the same)."""
    from fedlib.report import fmt, markdown_table, plus_minus

    with pytest.raises(ValueError, match="^spec must be a format spec"):
        fmt(0.0123456, spec)
    with pytest.raises(ValueError, match="^spec must be a format spec"):
        plus_minus(0.25, 0.01, spec)
    with pytest.raises(ValueError, match="^spec must be a format spec"):
        markdown_table(["a"], [[0.5]], spec=spec)


def test_fmt_string_specs_still_print_floats_as_str():
    from fedlib.report import fmt

    assert fmt(0.1234567, "s") == "0.1234567" and fmt(0.5, "") == "0.5" and fmt(0.01, ".4f") == "0.0100"


def test_tables_read_rows_given_as_an_iterator_once():
    """Was: rows given as a generator, map or zip were used up by the check that every row has as many cells as
    the header, and markdown_table printed the header alone ('| a | b |\\n|---|---|') without a word;
    transposed_markdown_table, a generator header or a generator row raised TypeError ("object of type
    'generator' has no len()"), and header=None / rows=None TypeErrors naming neither."""
    expected = markdown_table(["a", "b"], [[0, 0.0], [1, 0.5], [2, 1.0]])
    assert expected.count("\n") == 4
    assert markdown_table(["a", "b"], ([i, i * 0.5] for i in range(3))) == expected
    assert markdown_table(["a", "b"], zip([0, 1, 2], [0.0, 0.5, 1.0])) == expected
    assert markdown_table((h for h in ["a", "b"]), [iter([i, i * 0.5]) for i in range(3)]) == expected
    assert transposed_markdown_table(["a", "b"], zip([0, 1, 2], [0.0, 0.5, 1.0])) == \
        transposed_markdown_table(["a", "b"], [[0, 0.0], [1, 0.5], [2, 1.0]])
    for function in (markdown_table, transposed_markdown_table):
        with pytest.raises(ValueError, match=r"^header must be a sequence of column names, got NoneType"):
            function(None, [[1]])
        with pytest.raises(ValueError, match=r"^rows must be a sequence of rows, each a sequence of cells"):
            function(["a"], None)
        with pytest.raises(ValueError, match=r"^rows must be a sequence of rows"):
            function(["a"], [1])


def test_tables_refuse_a_row_given_as_a_dict_or_a_string_rather_than_print_its_keys_or_characters():
    """A row given as a dict (a record, ``{"a": 1, "b": 2}``) or a str, rows given as a dict or a str, and a header given
    as a str are refused by name, with the call that was meant. Before: ``list()`` of each was taken, so
    ``markdown_table(["a", "b"], [{"a": 1, "b": 2}])`` printed the keys as the cells ('| a | b |' under the header)
    without a word, a str row printed its characters ('| x | y |' for "xy") and a header "ab" gave two columns 'a' and
    'b'. Lists, tuples, generators, zips and numpy rows are read as before."""
    for function in (markdown_table, transposed_markdown_table):
        with pytest.raises(ValueError, match=r"^rows\[1\] is a dict: give its cells in the header's order, e\.g\. "
                                             r"\[row\[name\] for name in header\]$"):
            function(["a", "b"], [[0, 1], {"a": 1, "b": 2}])
        with pytest.raises(ValueError, match=r"^rows\[0\] is a str \('xy'\): a row is a sequence of cells \(one cell: "
                                             r"\['xy'\]\)$"):
            function(["a", "b"], ["xy"])
        with pytest.raises(ValueError, match=r"^rows must be a sequence of rows, each a sequence of cells, got a dict$"):
            function(["a", "b"], {"x": [1, 2]})
        with pytest.raises(ValueError, match=r"^header must be a sequence of column names, got a str \('ab'\); one "
                                             r"column: \['ab'\]$"):
            function("ab", [[1, 2]])
    expected = "| a | b |\n|---|---|\n| 1 | 2 |"
    assert markdown_table(["a", "b"], [[1, 2]]) == expected
    assert markdown_table(("a", "b"), [(1, 2)]) == expected
    assert markdown_table(["a", "b"], np.array([[1, 2]])) == expected
    assert markdown_table({"a": 0, "b": 0}.keys(), [{"a": 1, "b": 2}.values()]) == expected


# ----------------------------------------------------------------------------------------- a zero error of either sign
@pytest.mark.parametrize("zero", [-0.0, np.float32(-0.0), np.float64(-0.0), np.array(-0.0), torch.tensor(-0.0)])
def test_plus_minus_prints_a_negative_zero_error_without_its_sign(zero):
    """A zero spread prints as the zero it is, ``± 0``, whatever its sign bit. Was: ``plus_minus(1, -0.0)`` was
    '1 ± -0' (and '1 ± -0.00' with '.2f'), for a Python, numpy or torch -0.0 alike."""
    assert plus_minus(1, zero) == "1 ± 0" == plus_minus(1, 0.0)
    assert plus_minus(0.5, zero, ".2f") == "0.50 ± 0.00" == plus_minus(0.5, 0.0, ".2f")
    assert plus_minus(-0.25, zero, ".3g") == "-0.25 ± 0"  # the value keeps its sign


# ------------------------------------------------------------------------------ fmt of a 0-d integer array or tensor
@pytest.mark.parametrize("zero_d, scalar", [(np.array(12345), np.int64(12345)),
                                            (np.array(200, dtype=np.uint8), np.uint8(200)),
                                            (np.array(-7, dtype=np.int16), np.int16(-7)),
                                            (np.array(True), np.bool_(True)),
                                            (torch.tensor(12345), 12345),
                                            (torch.tensor(False), False)])
def test_fmt_prints_a_zero_d_integer_array_as_its_scalar(zero_d, scalar):
    """A 0-d numpy array or torch tensor of integers or bools prints as the scalar it holds, the way ``np.int64``
    (or the Python int) of the same value prints, whatever the spec. Was: it went through ``float``, so
    ``fmt(np.array(12345))`` was '1.23e+04' where ``fmt(np.int64(12345))`` is '12345', and ``fmt(np.array(True))``
    '1' where ``fmt(np.bool_(True))`` is 'True'."""
    from fedlib.report import fmt

    for spec in (".3g", ".2f", "s"):
        assert fmt(zero_d, spec) == fmt(scalar, spec) == str(scalar.item() if hasattr(scalar, "item") else scalar)
    assert markdown_table(["n"], [[zero_d]]) == markdown_table(["n"], [[scalar]])


def test_fmt_prints_a_zero_d_object_array_as_the_object_it_holds():
    """A 0-d object array (``np.asarray`` of a Python int too large for int64, or of any object) prints as what it
    holds, as that object prints: it went through ``float``, so 10**21 was '1e+21' where ``fmt(10**21)`` is the
    integer, and a held string was printed by ``str`` of the array (the same text, by luck)."""
    from fedlib.report import fmt

    big = 10**21
    assert fmt(np.array(big, dtype=object)) == fmt(big) == "1000000000000000000000"
    assert fmt(np.array(0.123456, dtype=object)) == fmt(0.123456) == "0.123"
    assert fmt(np.array("x", dtype=object)) == "x" and fmt(np.array(None, dtype=object)) == "None"


def test_fmt_still_formats_zero_d_float_arrays_with_the_spec():
    from fedlib.report import fmt

    assert fmt(np.array(0.123456)) == "0.123" == fmt(np.float64(0.123456))
    assert fmt(np.array(0.5, dtype=np.float32), ".2f") == "0.50" and fmt(torch.tensor(0.25), ".1f") == "0.2"
    assert plus_minus(np.array(3), np.array(1)) == "3 ± 1" and plus_minus(np.array(0.5), np.array(0.01)) == "0.5 ± 0.01"


# ------------------------------------------------------------------------------ fmt of complex numbers
@pytest.mark.parametrize("value", [0.5 + 2j, np.complex128(0.5 + 2j), np.complex64(0.5 + 2j), np.array(0.5 + 2j),
                                   torch.tensor(0.5 + 2j)])
def test_fmt_keeps_both_parts_of_a_complex_number(value):
    """A complex number prints both parts, each with the spec, whatever its type (a leading eigenvalue of chapter
    10's round maps is a complex pair). Was: np.complex128(0.5+2j) printed '0.50' under '.2f' (float() kept the
    real part, with only a ComplexWarning), a Python complex and a 0-d array '(0.5+2j)' (the spec ignored), and a
    0-d torch tensor raised RuntimeError."""
    import warnings

    from fedlib.report import fmt

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fmt(value, ".2f") == "0.50+2.00j" and fmt(value) == "0.5+2j"
        assert fmt(value, "s") == "(0.5+2j)"   # a spec that formats no complex: str of it
        assert markdown_table(["λ"], [[value]]).splitlines()[-1] == "| 0.5+2j |"

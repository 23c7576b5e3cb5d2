"""Inputs that failed late or produced broken output: a chapter-4 ``Setting`` given its epochs
as the command line writes them (``"1-5"``), and ``markdown_table`` with no columns."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.experiments.synthetic import SETTINGS, Setting, make_problem
from fedlib.report import markdown_table
from fedlib.schedules import RandomEpochs


def test_setting_takes_the_command_lines_epochs_string_and_pairs():
    """tuple("1-5") was ('1', '-', '5'): the schedule then failed with an unpacking error."""
    assert Setting("r", "r", "1-5").epochs == (1, 5)
    assert Setting("f", "f", "2").epochs == (2, 2)
    assert Setting("l", "l", [2, 3]).epochs == (2, 3)
    assert Setting("n", "n", (np.int64(1), np.int64(4))).epochs == (1, 4)
    assert [s.epochs for s in SETTINGS] == [(2, 2), (1, 5), (1, 5)]
    sched = Setting("r", "r", "1-5").schedule(make_problem(), seed=0)
    assert isinstance(sched, RandomEpochs) and (sched.low, sched.high) == (1, 5)


@pytest.mark.parametrize("bad", [(1, 2, 3), (2.0, 3), (5, 1), (0, 2), (True, 2), 3, None])
def test_setting_refuses_epochs_that_are_not_a_range(bad):
    with pytest.raises(ValueError, match=r"^epochs: expected integers \(low, high\) with 1 <= low <= high, or a "
                                         r"string like '1-5', got "):
        Setting("x", "x", bad)


def test_setting_refuses_a_bad_epochs_string_with_parse_epochs_message():
    with pytest.raises(ValueError, match="^epochs must be an integer like '2' or an inclusive range like '2-5', "
                                         "got 'x'$"):
        Setting("x", "x", "x")


def test_markdown_table_needs_a_column():
    with pytest.raises(ValueError, match="^header: a table needs at least one column$"):
        markdown_table([], [])
    assert markdown_table(["a"], []) == "| a |\n|---|"

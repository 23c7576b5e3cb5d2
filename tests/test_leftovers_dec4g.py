"""Leftovers of the December 4 audits (helper B, round g): error messages that named the wrong argument, a
NaN initial model reported without its run, a bool taken as an amount of work, and raw numpy/torch errors for
a float row index. Each test fails on the code before its fix."""
from __future__ import annotations

import pytest

from fedlib.schedules import RandomLocalWork


# --------------------------------------------------------------------------- 1. RandomLocalWork lengths
@pytest.mark.parametrize("low, high, sizes", [([1, 1, 1], [2, 3], "3 low and 2 high"),
                                              ([1, 1], [2, 3, 4], "2 low and 3 high")])
def test_random_local_work_length_mismatch_names_low_and_high(low, high, sizes):
    """Was: 'high must have 3 entries (one per client), got 2' when low had the extra entry."""
    with pytest.raises(ValueError, match=f"^low and high must have one entry per client each, got {sizes}$"):
        RandomLocalWork(low, high)

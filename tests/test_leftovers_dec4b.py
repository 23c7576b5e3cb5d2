"""Small leftovers of 4 December (b): error messages that name exactly what is wrong, and
``scripts/gpu_run.sh --help`` succeeding."""
from __future__ import annotations

import pytest

from fedlib.tree import tree_map


def test_tree_map_message_says_what_is_refused():
    """A list paired with a tuple of the same length is accepted; the messages name what is not."""
    assert tree_map(lambda x, y: x + y, [1, 2], (3, 4)) == [4, 6]
    with pytest.raises(ValueError, match=r"sequences of length 2 and 3"):
        tree_map(lambda x, y: x + y, [1, 2], (3, 4, 5))
    with pytest.raises(ValueError, match=r"a list is paired with a dict, not a list or tuple"):
        tree_map(lambda x, y: x + y, [1, 2], {"a": 1})
    with pytest.raises(ValueError, match=r"a tuple is paired with a int, not a list or tuple"):
        tree_map(lambda x, y: x + y, (1, 2), 3)

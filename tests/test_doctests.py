"""The runnable examples in the library's docstrings are tests too."""
import doctest
import importlib
import pkgutil

import pytest
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture: the examples train tiny networks)

import fedlib

MODULES = sorted(m.name for m in pkgutil.walk_packages(fedlib.__path__, "fedlib.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed"

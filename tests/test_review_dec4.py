"""Findings of the fresh-eyes review of the changes of 4 December (one test per finding)."""
import dataclasses
import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest

import fedlib
from fedlib.solvers import LocalSolver, check_builtin_step, sgd

ROLE = re.compile(r":(?:py:)?(?:func|meth|attr|class|data|obj|exc):`~?([^`<]+?)(?:\s*<[^>]*>)?`")


def _public_modules():
    for info in pkgutil.walk_packages(fedlib.__path__, "fedlib."):
        if any(part.startswith("_") for part in info.name.split(".")) or info.name.startswith("fedlib.cli"):
            continue  # fedlib.cli is not on the API page
        yield importlib.import_module(info.name)


def _docstrings_of(module):
    yield module.__doc__
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield obj.__doc__
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    yield member.__doc__


def test_unqualified_cross_references_name_what_the_api_page_documents():
    """The API page documents a module's ``__all__`` (``automodule :members:``); an unqualified
    ``:data:`NAME``` to a module-level name left out of it does not resolve, and the nitpicky
    ``-n -W`` build fails. ``check_own_step``'s ``:data:`OWN_STEP_PROBES``` was one."""
    bad = []
    for module in _public_modules():
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        for doc in _docstrings_of(module):
            for target in ROLE.findall(doc or ""):
                target = target.strip()
                if "." in target or target.startswith("_") or not hasattr(module, target):
                    continue
                if target not in exported and getattr(getattr(module, target), "__module__", module.__name__) \
                        == module.__name__:
                    bad.append(f"{module.__name__}: {target}")
    assert not bad, "cross-references to names outside __all__: " + "; ".join(sorted(set(bad)))


@dataclasses.dataclass(frozen=True)
class _OwnLeafStep(LocalSolver):
    """Overrides only the leaf step: not the built-in step, though init / update / counter_step are."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        return x - 2 * lr_k * g, u


def test_builtin_step_refusal_names_the_method_the_subclass_overrides():
    """``builtin_step`` also looks at ``_direction_and_params``, but the refusal said the subclass
    overrides "init / update / counter_step", none of which it does."""
    solver = _OwnLeafStep(lr=0.1)
    assert not solver.builtin_step and sgd(0.1).builtin_step
    with pytest.raises(ValueError, match=r"overrides LocalSolver's step \(_direction_and_params\), which"):
        check_builtin_step("algorithm.solver", [solver], "the fused step does not take")

"""Every parameter of a public callable on the API page is named in its docstring.

The API page (book/api.md) renders each ``automodule:: ... :members:`` module's ``__all__`` members and their
public methods, and ``help(fn)`` shows the same text in a notebook: a parameter the docstring never names is one
the reader must guess. A parameter counts as named when the docstring holds ``name`` as a word (``lr``, ``a_norms``;
``lr_at`` does not name ``lr``), in ````name```` or prose alike. A class is read with its ``__init__`` docstring, and a
NamedTuple or dataclass field is also named by its ``#:`` doc comment (tests/test_docstring_refs.py).

``PENDING`` lists the parameters still to document, module by module: a new undocumented parameter fails, and
so does a pending one that is documented now (remove it from the list), so the list only shrinks. ``ALLOWED``
holds the few parameters that need no words, each with its reason.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (object, parameter) -> why its docstring need not name it. Keep it short: prefer documenting.
ALLOWED: dict[tuple[str, str], str] = {}

#: module -> "object.parameter" entries not yet documented (to be emptied, never extended).
PENDING: dict[str, set[str]] = {}


def page_modules() -> list[str]:
    """The modules book/api.md renders with ``:members:``."""
    text = (ROOT / "book" / "api.md").read_text(encoding="utf8")
    return [m.group(1) for m in re.finditer(r"automodule::\s*(\S+)\n((?:[ \t]+:\S.*\n)*)", text)
            if ":members:" in m.group(2)]


def field_comments(cls) -> dict[str, str]:
    """A class's ``#:`` doc comments, by the attribute they document (above it, or after it on its line)."""
    try:
        src = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = src.splitlines()
    out = {}
    for node in ast.parse(src).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        else:
            continue
        comment, k = [], node.lineno - 2
        while k >= 0 and lines[k].strip().startswith("#:"):
            comment.insert(0, lines[k].strip()[2:])
            k -= 1
        if "#:" in lines[node.lineno - 1]:
            comment.append(lines[node.lineno - 1].split("#:", 1)[1])
        if "".join(comment).strip():
            out[target] = " ".join(comment)
    return out


def names(name: str, doc: str) -> bool:
    """Whether ``doc`` names the parameter ``name``: ``name`` in double backquotes, or as a word."""
    return f"``{name}``" in doc or re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc) is not None


def parameters(obj) -> list[str]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def documented_objects(module_name: str):
    """``(qualified name, callable, docstring, field comments)`` of what the API page shows of a module."""
    module = importlib.import_module(module_name)
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        if inspect.isclass(obj):
            doc = obj.__doc__ or ""
            init = obj.__dict__.get("__init__")
            if init is not None and init.__doc__:
                doc += "\n" + init.__doc__
            yield f"{module_name}.{name}", obj, doc, field_comments(obj)
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member) and member.__doc__:  # autodoc leaves undocumented methods out
                    yield f"{module_name}.{name}.{attr}", member, member.__doc__, {}
        elif callable(obj):
            yield f"{module_name}.{name}", obj, obj.__doc__ or "", {}


def undocumented(module_name: str) -> set[str]:
    """``object.parameter`` (relative to the module) of every parameter its docstring does not name."""
    out = set()
    for where, obj, doc, comments in documented_objects(module_name):
        for p in parameters(obj):
            if not names(p, doc) and p not in comments and (where, p) not in ALLOWED:
                out.add(f"{where[len(module_name) + 1:]}.{p}")
    return out


def test_the_page_has_modules_and_the_lists_name_them():
    modules = page_modules()
    assert len(modules) > 30 and "fedlib.rule" in modules and "fedlib.theory" in modules
    assert set(PENDING) <= set(modules), set(PENDING) - set(modules)
    for (where, _), reason in ALLOWED.items():
        assert any(where.startswith(m + ".") for m in modules) and reason.strip(), where


@pytest.mark.parametrize("module_name", page_modules())
def test_every_parameter_is_named_in_its_docstring(module_name):
    missing = undocumented(module_name)
    pending = PENDING.get(module_name, set())
    new, done = sorted(missing - pending), sorted(pending - missing)
    assert not new, f"{module_name}: parameters their docstrings never name (say what each is): {new}"
    assert not done, f"{module_name}: documented now, remove from PENDING: {done}"


def test_the_check_finds_an_unnamed_parameter_and_reads_doc_comments():
    def documented(lr, a_norms, *args, **kwargs):
        """``lr`` is the step size and a_norms the :math:`\\|a_i\\|_1`."""

    def lr_only_as_part_of_another_name(lr, lr_at):
        """``lr_at`` gives the rate of each round."""

    assert [p for p in parameters(documented) if not names(p, documented.__doc__)] == []
    assert [p for p in parameters(lr_only_as_part_of_another_name)
            if not names(p, lr_only_as_part_of_another_name.__doc__)] == ["lr"]
    assert not names("rounds", "rounds_list: the runs' lengths") and not names("x", "the limit x_star")

    from typing import NamedTuple

    class Row(NamedTuple):
        """A row."""

        #: The client learning rate.
        lr: float
        seconds: float  #: Wall-clock time.
        undocumented_field: int

    comments = field_comments(Row)
    assert set(comments) == {"lr", "seconds"}
    assert [p for p in parameters(Row) if not names(p, Row.__doc__) and p not in comments] == ["undocumented_field"]

"""The recipes of the library's docstrings are tests too: every reStructuredText literal
block (the indented block after a paragraph ending in ``::``) of a public docstring is
found, classified and checked, so a renamed function, a dropped flag or a changed file
layout fails here instead of misleading a reader. (``>>>`` examples: test_doctests.py.)

Kinds, and what each is checked for:

* ``shell``: ``python -m fedlib ...`` / ``torchrun ... -m fedlib ...`` lines (``VAR=value``
  prefixes, ``\\`` continuations and ``# comments`` allowed): the arguments are parsed by the
  command line's own parser (:func:`fedlib.cli.build_parser`), nothing is run. The same for
  the ``python -m fedlib`` lines of the book's chapters (README.md and book/intro.md:
  test_readme.py).
* ``python``: parses (:mod:`ast`); every ``fedlib`` import resolves; every name is bound by
  the block, its imports, the docstring's own module, a unique public ``fedlib`` name, a
  builtin, or is a declared placeholder (``PLACEHOLDERS``) / supplied fixture
  (``EXECUTED``); every call of a ``fedlib`` function, class or method (on an object
  whose class is known from a constructor or a return annotation) binds to its signature
  (keyword names, argument count); attributes of such objects exist. Blocks in
  ``EXECUTED`` are also run, with small sizes and the fixtures named there.
* ``json``: a JSON-like layout (starts with ``{``); its keys are compared with what the
  library writes (``JSON_CHECKS``).
* ``layout``: a plain-text layout (file tree, architecture table), each with a checker
  against the code (``LAYOUT_CHECKS``).

A block that fits no kind, or a ``json`` / ``layout`` / static-only ``python`` block not
registered below, fails: a new recipe must be made checkable.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import json
import pickle
import pkgutil
import re
import shlex
import textwrap
import typing
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import pytest

import fedlib
from fedlib.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["fedlib"] + sorted(m.name for m in pkgutil.walk_packages(fedlib.__path__, "fedlib.")
                              if not m.name.endswith("__main__"))


# --------------------------------------------------------------------------- extraction
class Block(NamedTuple):
    module: str     # the module whose source holds the docstring
    where: str      # qualified name of the documented object
    intro: str      # the line ending in "::" (stripped)
    text: str       # the literal block, dedented

    @property
    def key(self) -> tuple:
        return self.where, self.intro

    @property
    def id(self) -> str:
        return f"{self.where}: {self.intro[:50]}"


def _docstrings(name: str) -> list:
    """``(qualified name, cleaned docstring)`` of a module and its public classes,
    functions and methods (those defined in that module)."""
    module = importlib.import_module(name)
    found = [(name, module.__doc__)]
    for attr, obj in vars(module).items():
        if attr.startswith("_") or getattr(obj, "__module__", None) != name:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found.append((f"{name}.{attr}", obj.__doc__))
        if inspect.isclass(obj):
            for mname, member in vars(obj).items():
                if mname.startswith("_") and mname != "__init__":
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    found.append((f"{name}.{attr}.{mname}", member.__doc__))
    return [(q, inspect.cleandoc(d)) for q, d in found if isinstance(d, str)]


_DIRECTIVE = re.compile(r"^\s*\.\. [\w:-]+::")
_CODE_DIRECTIVE = re.compile(r"^\s*\.\. (code-block|code|sourcecode)::")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def literal_blocks(doc: str) -> list:
    """``(intro line, dedented text)`` of every ``::`` literal block (and code directive) of
    a cleaned docstring; ``.. math::`` and other directives are not literal blocks."""
    lines = doc.splitlines()
    out = []
    for i, line in enumerate(lines):
        if _CODE_DIRECTIVE.match(line):
            pass
        elif not line.rstrip().endswith("::") or _DIRECTIVE.match(line):
            continue
        indent, body, j = _indent(line), [], i + 1
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > indent):
            body.append(lines[j])
            j += 1
        if _CODE_DIRECTIVE.match(line):  # options (":linenos:") come first
            while body and body[0].strip().startswith(":"):
                body.pop(0)
        out.append((line.strip(), textwrap.dedent("\n".join(body)).strip("\n")))
    return out


@functools.lru_cache(maxsize=None)
def all_blocks() -> tuple:
    blocks = []
    for name in MODULES:
        for where, doc in _docstrings(name):
            blocks += [Block(name, where, intro, text) for intro, text in literal_blocks(doc)]
    return tuple(blocks)


def _source_file(module: str) -> Path:
    return Path(importlib.import_module(module).__file__)


# --------------------------------------------------------------------------- classification
def _logical_lines(text: str) -> list:
    """Shell lines: ``\\`` continuations joined; blank and comment-only lines dropped."""
    lines = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if line.strip() and not line.strip().startswith("#"):
            lines.append(line.strip())
    return lines


def fedlib_argv(line: str) -> Optional[list]:
    """The arguments after ``-m fedlib`` of a ``python``/``torchrun`` line (``VAR=value``
    prefixes and a trailing ``# comment`` dropped), else ``None``."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return None
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0]):
        tokens.pop(0)
    if not tokens or Path(tokens[0]).name not in ("python", "python3", "torchrun"):
        return None
    for k in range(1, len(tokens) - 1):
        if tokens[k] == "-m" and tokens[k + 1] == "fedlib":
            return tokens[k + 2:]
    return None


def _is_shell(text: str) -> bool:
    lines = _logical_lines(text)
    return bool(lines) and any(fedlib_argv(line) is not None for line in lines)


def _python_source(block: Block) -> str:
    for (where, snippet), (replacement, _reason) in PSEUDO_CODE.items():
        if where == block.where and snippet in block.text:
            return block.text.replace(snippet, replacement)
    return block.text


def classify(block: Block) -> str:
    if _is_shell(block.text):
        return "shell"
    if block.text.lstrip().startswith("{"):
        return "json"
    if block.key in LAYOUT_CHECKS:
        return "layout"
    try:
        ast.parse(_python_source(block))
    except SyntaxError:
        return "unknown"
    return "python"


# --------------------------------------------------------------------------- python: static checks
def _fedlib_defined(obj: Any) -> bool:
    return str(getattr(obj, "__module__", None) or "").startswith("fedlib")


@functools.lru_cache(maxsize=None)
def public_index() -> dict:
    """Public name -> object for the names that one ``fedlib`` object goes by (``None``
    for a name two different objects share)."""
    index: dict = {}
    for name in MODULES:
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None) or [a for a in vars(module) if not a.startswith("_")]
        for attr in names:
            obj = getattr(module, attr, None)
            if obj is None or inspect.ismodule(obj) or not _fedlib_defined(obj):
                continue
            if attr in index and index[attr] is not obj:
                index[attr] = None
            else:
                index[attr] = obj
    return {k: v for k, v in index.items() if v is not None}


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return tp


def _return_type(obj: Any) -> Any:
    """The class (or tuple of classes) a call of ``obj`` returns, when annotated."""
    if inspect.isclass(obj):
        return obj
    try:
        hint = typing.get_type_hints(obj).get("return")
    except Exception:  # unresolvable annotations: unknown
        return None
    hint = _unwrap_optional(hint)
    if typing.get_origin(hint) in (tuple, typing.Tuple):
        args = typing.get_args(hint)
        if args and Ellipsis not in args:
            return tuple(_unwrap_optional(a) if inspect.isclass(_unwrap_optional(a)) else None for a in args)
        return None
    return hint if inspect.isclass(hint) else None


def _field_type(cls: type, name: str) -> Any:
    """The annotated class of attribute ``name`` of ``cls`` (field or property)."""
    member = inspect.getattr_static(cls, name, None)
    if isinstance(member, property) and member.fget is not None:
        return _return_type(member.fget)
    try:
        hint = typing.get_type_hints(cls).get(name)
    except Exception:
        return None
    hint = _unwrap_optional(hint)
    return hint if inspect.isclass(hint) else None


def _has_attribute(cls: type, name: str) -> bool:
    if hasattr(cls, name) or name in getattr(cls, "_fields", ()):
        return True
    if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
        return True
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(name)}\s*(:[^=]+)?=", source):
            return True
    return False


class _Obj(NamedTuple):   # a known object: module, class, function
    value: Any


class _Inst(NamedTuple):  # an instance of a known class
    cls: type


_UNKNOWN = None
_PLACEHOLDER = object()


class StaticChecker(ast.NodeVisitor):
    """One pass over a Python block in source order, binding names as it goes."""

    def __init__(self, block: Block, free):
        """``free``: the block's free names; a mapping gives their values (fixtures),
        whose classes type the names when they are fedlib classes."""
        self.block = block
        self.free = set(free)
        self.module = importlib.import_module(block.module)
        self.env: dict = {}
        if isinstance(free, dict):
            self.env = {k: _Inst(type(v)) for k, v in free.items() if _fedlib_defined(type(v))}
        self.problems: list = []
        self.calls_checked = 0

    # ---- names
    def lookup(self, name: str) -> Any:
        if name in self.env:
            return self.env[name]
        if name in self.free:
            return _UNKNOWN
        if name in vars(self.module):
            return _Obj(vars(self.module)[name])
        if name in public_index():
            return _Obj(public_index()[name])
        if hasattr(builtins, name):
            return _Obj(getattr(builtins, name))
        return _PLACEHOLDER

    def bind_unknown(self, target: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                self.env[node.id] = _UNKNOWN
        if not isinstance(target, ast.Name):
            self.visit(target)  # subscripts / attributes as targets read their base

    def type_of(self, node: ast.AST) -> Any:
        """``_Obj``, ``_Inst`` or ``None`` (unknown) for an expression."""
        if isinstance(node, ast.Name):
            found = self.lookup(node.id)
            return found if found is not _PLACEHOLDER else _UNKNOWN
        if isinstance(node, ast.Attribute):
            base = self.type_of(node.value)
            if isinstance(base, _Obj):
                return _Obj(getattr(base.value, node.attr)) if hasattr(base.value, node.attr) else _UNKNOWN
            if isinstance(base, _Inst):
                cls = _field_type(base.cls, node.attr)
                return _Inst(cls) if cls is not None else _UNKNOWN
            return _UNKNOWN
        if isinstance(node, ast.Call):
            target = self.callee(node.func)
            if target is None:
                return _UNKNOWN
            ret = _return_type(target[0])
            return _Inst(ret) if inspect.isclass(ret) and _fedlib_defined(ret) else _UNKNOWN
        return _UNKNOWN

    # ---- imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            try:
                module = importlib.import_module(alias.name)
            except ImportError as exc:
                if alias.name.split(".")[0] == "fedlib":
                    self.problems.append(f"line {node.lineno}: import {alias.name}: {exc}")
                module = None
            top = alias.name.split(".")[0]
            if alias.asname:
                self.env[alias.asname] = _Obj(module) if module else _UNKNOWN
            else:
                self.env[top] = _Obj(importlib.import_module(top)) if module else _UNKNOWN

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        is_fedlib = (node.module or "").split(".")[0] == "fedlib" and node.level == 0
        for alias in node.names:
            bound = alias.asname or alias.name
            try:
                module = importlib.import_module(node.module)
                if hasattr(module, alias.name):
                    obj = getattr(module, alias.name)
                else:
                    obj = importlib.import_module(f"{node.module}.{alias.name}")
                self.env[bound] = _Obj(obj)
            except ImportError as exc:
                if is_fedlib:
                    self.problems.append(f"line {node.lineno}: from {node.module} import {alias.name}: {exc}")
                self.env[bound] = _UNKNOWN

    # ---- bindings, in source order
    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        value_type = self.type_of(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.env[target.id] = value_type
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Call):
                ret = self.callee(node.value.func)
                ret = _return_type(ret[0]) if ret else None
                for k, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name) and isinstance(ret, tuple) and k < len(ret) and ret[k] is not None:
                        self.env[elt.id] = _Inst(ret[k])
                    else:
                        self.bind_unknown(elt)
            else:
                self.bind_unknown(target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.visit(ast.Name(node.target.id, ast.Load(), lineno=node.lineno))
        else:
            self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.bind_unknown(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.bind_unknown(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind_unknown(item.optional_vars)
        for stmt in node.body:
            self.visit(stmt)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.env[node.name] = _UNKNOWN
        saved = dict(self.env)
        for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
            self.env[arg.arg] = _UNKNOWN
        for stmt in node.body:
            self.visit(stmt)
        self.env = {**saved, node.name: _UNKNOWN}

    def visit_Lambda(self, node: ast.Lambda) -> None:
        saved = dict(self.env)
        for arg in node.args.args + node.args.kwonlyargs:
            self.env[arg.arg] = _UNKNOWN
        self.visit(node.body)
        self.env = saved

    def _comprehension(self, node, *elts) -> None:
        for gen in node.generators:
            self.visit(gen.iter)
            self.bind_unknown(gen.target)
            for cond in gen.ifs:
                self.visit(cond)
        for elt in elts:
            self.visit(elt)

    def visit_ListComp(self, node):
        self._comprehension(node, node.elt)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, node.key, node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self.lookup(node.id) is _PLACEHOLDER:
            self.problems.append(f"line {node.lineno}: name {node.id!r} is bound nowhere (not in the block, its "
                                 f"imports, {self.block.module}, fedlib's public names, the builtins or the "
                                 f"block's declared placeholders)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)
        base = self.type_of(node.value)
        if isinstance(base, _Obj) and (inspect.ismodule(base.value) and base.value.__name__.startswith("fedlib")
                                       or inspect.isclass(base.value) and _fedlib_defined(base.value)):
            if not hasattr(base.value, node.attr):
                self.problems.append(f"line {node.lineno}: {base.value.__name__} has no attribute {node.attr!r}")
        elif isinstance(base, _Inst) and _fedlib_defined(base.cls):
            if not _has_attribute(base.cls, node.attr):
                self.problems.append(f"line {node.lineno}: a {base.cls.__name__} has no attribute {node.attr!r}")

    # ---- calls
    def callee(self, func: ast.AST) -> Optional[tuple]:
        """``(callable, needs_self)`` for a call of a fedlib object, else ``None``."""
        if isinstance(func, ast.Name):
            found = self.lookup(func.id)
            if isinstance(found, _Obj) and callable(found.value) and _fedlib_defined(found.value):
                return found.value, False
            return None
        if isinstance(func, ast.Attribute):
            base = self.type_of(func.value)
            if isinstance(base, _Obj) and hasattr(base.value, func.attr):
                obj = getattr(base.value, func.attr)
                return (obj, False) if callable(obj) and _fedlib_defined(obj) else None
            if isinstance(base, _Inst) and _fedlib_defined(base.cls):
                member = inspect.getattr_static(base.cls, func.attr, None)
                if isinstance(member, staticmethod):
                    return member.__func__, False
                if isinstance(member, classmethod):
                    return getattr(base.cls, func.attr), False
                if inspect.isfunction(member) or inspect.isfunction(getattr(base.cls, func.attr, None)):
                    return getattr(base.cls, func.attr), True
        return None

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        target = self.callee(node.func)
        if target is None:
            return
        obj, needs_self = target
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            return
        self.calls_checked += 1
        label = getattr(obj, "__qualname__", repr(obj))
        starred = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        kwargs = {k.arg: None for k in node.keywords if k.arg is not None}
        if starred:
            params = sig.parameters
            if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                bad = sorted(set(kwargs) - set(params))
                if bad:
                    self.problems.append(f"line {node.lineno}: {label}() has no parameter {bad}")
            return
        args = [None] * (len(node.args) + needs_self)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            self.problems.append(f"line {node.lineno}: {label}{sig}: {exc}")


# --------------------------------------------------------------------------- python: executed recipes
def _fixtures_algorithm_round() -> dict:
    from fedlib.algorithms import make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    target = [np.array([1.0, -2.0, 0.5]), np.array([[0.3]])]
    p = np.array([0.25, 0.75])
    return dict(algo=make_algorithm("fednova", sgd(0.1)), params=[np.zeros(3), np.zeros((1, 1))],
                num_clients=2, participants=range(2), tau_i=3, lr=0.1, p=p,
                participation=full_participation(p),
                grad=lambda x: [xi - ti for xi, ti in zip(x, target)])


def _check_algorithm_round(ns: dict) -> None:
    assert ns["state"].round == 1 and len(ns["updates"]) == 2
    assert [u.local_steps for u in ns["updates"]] == [3, 3]
    assert np.all(np.isfinite(ns["state"].params[0])) and not np.allclose(ns["state"].params[0], 0)


def _fixtures_optim_round() -> dict:
    import torch

    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(4, 3, generator=g) for _ in range(3)]
    ys = [torch.randint(0, 2, (4,), generator=g) for _ in range(3)]
    torch.manual_seed(0)
    return dict(model=torch.nn.Linear(3, 2), m=2, rounds=2, F=torch.nn.functional,
                loaders=[list(zip(xs[:2], ys[:2])), list(zip(xs[2:], ys[2:]))], p=np.array([0.5, 0.5]))


def _check_optim_round(ns: dict) -> None:
    assert ns["server"].round == 2
    assert list(ns["diag"].local_steps) == [2, 1]


def _fixtures_cli_common() -> dict:
    parser = argparse.ArgumentParser(prog="fedlib-test")
    subparsers = parser.add_subparsers(dest="command")

    def my_run(args):
        return 0

    return dict(subparsers=subparsers, my_run=my_run, _parser=parser)


def _check_cli_common(ns: dict) -> None:
    args = ns["_parser"].parse_args(["synthetic", "--algorithm", "fedprox", "--mu", "0.1", "--out", "x.json"])
    assert args.handler is ns["my_run"]
    assert (args.lr, args.rounds, args.epochs, args.batch_size) == (0.02, 100, "2", 20)


def _fixtures_save_figure() -> dict:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1))
    fig.add_subplot().plot([0, 1], [1, 0])
    return dict(fig=fig, profile="ci", seed=0)


def _check_save_figure(ns: dict) -> None:
    from fedlib.plotting import figures_dir

    written = sorted(figures_dir().glob("**/ch02_figure2_quadratic.*"))
    # the block's comments: "PROFILE=full make book -> figures/ch02_figure2_quadratic.{png,svg};
    # papermill -p profile full -> figures/full/...; ci -> figures/ci/...; seed 3 -> figures/full-seed3/..."
    assert [p.relative_to(figures_dir()).as_posix() for p in written] == \
        ["ci/ch02_figure2_quadratic.png", "ci/ch02_figure2_quadratic.svg"]
    import os
    from unittest import mock

    from fedlib.plotting import BOOK_BUILD_ENV

    for build, folder in ((None, "full/"), ("full", "")):
        env = {k: v for k, v in os.environ.items() if k != BOOK_BUILD_ENV} | ({BOOK_BUILD_ENV: build} if build else {})
        with mock.patch.dict(os.environ, env, clear=True):
            full = ns["save_figure"](ns["fig"], "ch02_figure2_quadratic", profile="full")
        assert [p.relative_to(figures_dir()).as_posix() for p in full] == \
            [f"{folder}ch02_figure2_quadratic.png", f"{folder}ch02_figure2_quadratic.svg"]
    seed3 = ns["save_figure"](ns["fig"], "ch02_figure2_quadratic", profile="full", seed=3)
    assert seed3[0].relative_to(figures_dir()).as_posix() == "full-seed3/ch02_figure2_quadratic.png"


class Executed(NamedTuple):
    fixtures: Callable[[], dict]
    check: Callable[[dict], None]


#: Blocks that are run (besides the static checks): (where, intro) -> fixtures binding the
#: block's free names (small sizes) and a check of the outcome.
EXECUTED = {
    ("fedlib.algorithms", "A round::"): Executed(_fixtures_algorithm_round, _check_algorithm_round),
    ("fedlib.optim", "A round, in user code (chapter 6 runs it)::"): Executed(_fixtures_optim_round,
                                                                             _check_optim_round),
    ("fedlib.cli.common", "its parser from these groups, with its own defaults::"):
        Executed(_fixtures_cli_common, _check_cli_common),
    ("fedlib.plotting.save_figure", "In a chapter (``profile`` and ``seed`` come from its ``parameters`` cell)::"):
        Executed(_fixtures_save_figure, _check_save_figure),
}

#: Python blocks checked statically only: (where, intro) -> (the block's free names, why
#: it is not run).
STATIC_ONLY = {
    ("fedlib.engines.stacked", "6 runs x 16 clients = 96 models on one GPU::"): (
        set(), "needs the full CIFAR-10 data set, a CUDA device and 96 VGG-11 models (Table 1's setup); "
               "the same construction runs in tests/test_stacked_engine.py at toy sizes"),
    ("fedlib.experiments.custom",
     ':func:`train_clients` is the short entry point of the "Your own model" chapter::'): (
        {"model", "client_x", "client_y"},
        "costs ~5 s (torch.func's first use imports much of torch; 20 rounds are written in the recipe); "
        "train_clients runs in tests/test_custom_model.py and chapter 6"),
    ("fedlib.distributed.init_from_env",
     "In a script launched with ``torchrun --nproc_per_node 2 script.py`` (what ``--distributed`` does)::"): (
        set(), "needs torchrun's environment (WORLD_SIZE, RANK, a rendezvous); the docstring's >>> example runs "
               "init_from_env in one process, tests/test_distributed.py on 2 and 3"),
}

#: Pseudo-code allowed in Python blocks: (where, text) -> (Python replacement, reason).
#: Empty: every Python recipe is real Python.
PSEUDO_CODE: dict = {}


# --------------------------------------------------------------------------- json / layouts
def json_keys(text: str) -> set:
    """Paths of the keys of a JSON-like layout (``...``, ``|`` alternatives and ``#``
    comments allowed): ``("provenance", "git_commit")``; a list adds no level (the keys of
    ``"history": [{"round": ...}]`` are ``("history", "round")``)."""
    text = re.sub(r"#[^\n]*", "", text)
    stack: list = []      # open containers: ("{" or "[", the key they are the value of)
    last_key = None
    paths = set()
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"\s*(:)?|[{}\[\]]', text):
        token = m.group(0)
        if token == "{":
            stack.append(("{", stack[-1][1] if stack and stack[-1][0] == "[" else last_key))
        elif token == "[":
            stack.append(("[", last_key))
        elif token in "]}":
            stack.pop()
        elif m.group(2):
            last_key = m.group(1)
            paths.add(tuple(key for kind, key in stack if kind == "{")[1:] + (last_key,))
    assert not stack, "unbalanced brackets"
    return paths


def _check_results_schema(block: Block) -> None:
    from fedlib import results as R

    keys = json_keys(block.text)
    top = {k[0] for k in keys if len(k) == 1}
    prov_doc = {k[1] for k in keys if len(k) == 2 and k[0] == "provenance"}
    hist_doc = {k[1] for k in keys if len(k) == 2 and k[0] == "history"}
    init_doc = {k[1] for k in keys if len(k) == 2 and k[0] == "initial"}
    # a provenance whose git state changed during the run has every documented key
    commits = iter([("0" * 40, False)])
    original = R.git_commit
    R.git_commit = lambda root=None: next(commits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prov = R.make_provenance(0.0, 1.0, "cpu", "python -m fedlib run synthetic",
                                     git_start=("1" * 40, True))
    finally:
        R.git_commit = original
    # what the command line writes: a tiny real run
    import tempfile

    from fedlib.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        assert main(["run", "synthetic", "--rounds", "1", "--num-clients", "2", "--quiet", "--out", str(out)]) == 0
        result = R.read_result(out)
    assert top == set(result), f"top-level keys: documented {sorted(top)}, written {sorted(result)}"
    assert prov_doc == set(prov), (f"provenance: documented but not written {sorted(prov_doc - set(prov))}, "
                                   f"written but not documented {sorted(set(prov) - prov_doc)}")
    assert set(result["provenance"]) <= prov_doc and set(R.PROVENANCE_KEYS) <= prov_doc
    assert hist_doc == set(R.HISTORY_KEYS), f"history: documented {sorted(hist_doc)}, required {R.HISTORY_KEYS}"
    assert hist_doc <= set(result["history"][0])
    assert init_doc == set(result["initial"]), f"initial: documented {init_doc}, written {set(result['initial'])}"
    assert f'"schema": "{R.SCHEMA}"' in block.text and result["kind"] == "run"


def _check_leaf_layout(block: Block) -> None:
    import tempfile

    from fedlib.data.leaf import save_leaf
    from fedlib.data.synthetic import synthetic

    keys = json_keys(block.text)
    with tempfile.TemporaryDirectory() as tmp:
        files = save_leaf(synthetic(num_clients=2, seed=0), tmp)
        doc = json.loads(Path(files[0]).read_text())
    assert {k[0] for k in keys if len(k) == 1} == set(doc)
    user = doc["users"][0]
    assert re.fullmatch(r"f_\d{5}", user), user  # the documented id style, "f_00000"
    assert {k[-1] for k in keys if len(k) == 3 and k[0] == "user_data"} == set(doc["user_data"][user])
    assert isinstance(doc["num_samples"][0], int) and isinstance(doc["user_data"][user]["y"][0], int)


#: JSON-like blocks: (where, intro) -> checker.
JSON_CHECKS = {
    ("fedlib.results", "one JSON object::"): _check_results_schema,
    ("fedlib.data.leaf", "One JSON file holds some users::"): _check_leaf_layout,
}


def _check_cifar_tree(block: Block) -> None:
    """Build the documented tree (tiny batches) and load it with :func:`load_cifar10`."""
    import tempfile

    from fedlib.data import cifar10 as C

    (line,) = block.text.splitlines()
    path, files = line.split("/", 2)[:2], line.split("/", 2)[2]
    assert path[0] == "root" and path[1] == C.BATCH_FOLDER, line
    names = []
    for item in files.split(","):
        item = item.strip()
        m = re.fullmatch(r"(\w+?)(\d+) \.\.\. (\w+?)(\d+)", item)
        if m:
            assert m.group(1) == m.group(3)
            names += [f"{m.group(1)}{k}" for k in range(int(m.group(2)), int(m.group(4)) + 1)]
        else:
            names.append(item)
    assert set(C.TRAIN_FILES) | {C.TEST_FILE} <= set(names), (names, C.TRAIN_FILES, C.TEST_FILE)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / C.BATCH_FOLDER
        folder.mkdir()
        for k, name in enumerate(names):
            batch = {"data": np.full((2, 3072), k, np.uint8), "labels": [k % 10, 1]}
            (folder / name).write_bytes(pickle.dumps(batch))
        data = C.load_cifar10(tmp)
    assert data.train_images.shape == (10, 32, 32, 3) and data.test_images.shape == (2, 32, 32, 3)


_LAYER = re.compile(r"(\d+) (\w+)(?:\(([^)]*)\))?")


def _layer_text(layer) -> str:
    import torch.nn as nn

    if isinstance(layer, nn.Conv2d):
        return f"Conv2d({layer.in_channels}, {layer.out_channels})"
    if isinstance(layer, nn.Linear):
        return f"Linear({layer.in_features}, {layer.out_features})"
    if isinstance(layer, nn.Dropout):
        return f"Dropout({layer.p})"
    return type(layer).__name__


@functools.lru_cache(maxsize=None)
def _vgg11_layers() -> tuple:
    from fedlib.models import vgg11

    return tuple(_layer_text(layer) for layer in vgg11(seed=0))


def _check_vgg_architecture(block: Block) -> None:
    features, classifier = block.text.splitlines()
    features = features.split("(")[0]
    expected = []
    for item in features.replace(" ", "").strip(",").split(","):
        expected += ["MaxPool2d"] if item == "M" else [f"Conv:{item}", "ReLU"]
    layers = list(_vgg11_layers())
    flat = layers.index("Flatten")
    got = [f"Conv:{t.split(', ')[1][:-1]}" if t.startswith("Conv2d") else t for t in layers[:flat]]
    assert got == expected, (got, expected)
    assert re.findall(r"\w+(?:\([^)]*\))?", classifier) == layers[flat + 1:]


def _check_vgg_indices(block: Block) -> None:
    documented = {int(i): (name + (f"({args})" if args else "")) for i, name, args in _LAYER.findall(block.text)}
    layers = _vgg11_layers()
    assert sorted(documented) == list(range(len(layers))), sorted(documented)
    assert [documented[i] for i in range(len(layers))] == list(layers)


#: Plain-text layouts: (where, intro) -> checker against the code.
LAYOUT_CHECKS = {
    ("fedlib.data.cifar10", "On-disk layout (the official archive and torchvision's ``CIFAR10(root=...)``)::"):
        _check_cifar_tree,
    ("fedlib.models", "many output channels followed by ReLU::"): _check_vgg_architecture,
    ("fedlib.models", "network that trains many clients at once).  Indices at ``width=1``::"): _check_vgg_indices,
}


# --------------------------------------------------------------------------- shell
#: Placeholders of the command summaries: ``[flags]`` is dropped; ``<command>`` stands for
#: every registered command.
def _commands() -> list:
    out = []
    for group, entries in COMMANDS.items():
        out += [[group, name] if group else [name] for name in entries]
    return out


def expand_argv(argv: list) -> list:
    argv = [a for a in argv if a != "[flags]"]
    if "<command>" in argv:
        k = argv.index("<command>")
        return [argv[:k] + c + argv[k + 1:] for c in _commands()]
    return [argv]


@functools.lru_cache(maxsize=None)
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def parse_command(argv: list) -> argparse.Namespace:
    """Parse with the command line's parser (``--help`` prints, exits 0: allowed); any
    other exit is a failure with argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return _parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0 and ("--help" in argv or "-h" in argv):
            return argparse.Namespace()
        raise AssertionError(f"python -m fedlib {shlex.join(argv)}: {err.getvalue().strip()}") from None


# --------------------------------------------------------------------------- the tests
def _blocks_of(kind: str) -> list:
    return [pytest.param(b, id=b.id) for b in all_blocks() if classify(b) == kind]


def test_every_literal_block_is_found():
    """Each source line ending in ``::`` (not a directive) is one collected block: no recipe
    hides in a docstring the walk misses (a private object, a comment)."""
    per_file: dict = {}
    for block in all_blocks():
        per_file.setdefault(_source_file(block.module), []).append(block.intro)
    for name in MODULES:
        file = _source_file(name)
        lines = [ln.strip() for ln in file.read_text().splitlines()
                 if ln.rstrip().endswith("::") and not _DIRECTIVE.match(ln)]
        assert len(lines) == len(per_file.get(file, [])), (file, lines, per_file.get(file))
    assert len(all_blocks()) >= 14


def test_every_block_is_classified_and_registered():
    problems = []
    for block in all_blocks():
        kind = classify(block)
        if kind == "unknown":
            reason = "no kind fits"
            try:
                ast.parse(block.text)
            except SyntaxError as exc:
                reason = f"not Python ({exc.msg}, line {exc.lineno}), not a fedlib command, not a registered layout"
            problems.append(f"{block.id}: unclassified block ({reason}):\n{block.text}")
        elif kind == "python" and (block.key in EXECUTED) == (block.key in STATIC_ONLY):
            problems.append(f"{block.id}: a Python block must be in exactly one of EXECUTED / STATIC_ONLY")
        elif kind == "json" and block.key not in JSON_CHECKS:
            problems.append(f"{block.id}: a JSON-like block without a checker in JSON_CHECKS")
    registered = set(EXECUTED) | set(STATIC_ONLY) | set(JSON_CHECKS) | set(LAYOUT_CHECKS)
    stale = registered - {b.key for b in all_blocks()}
    if stale:
        problems.append(f"registered blocks that no docstring has any more: {sorted(stale)}")
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("block", _blocks_of("python"))
def test_python_recipe_is_consistent_with_the_library(block):
    if block.key in EXECUTED:
        free = EXECUTED[block.key].fixtures()
    else:
        free = STATIC_ONLY.get(block.key, (set(), ""))[0]
    checker = StaticChecker(block, free)
    checker.visit(ast.parse(_python_source(block)))
    assert not checker.problems, f"{block.id}:\n" + "\n".join(checker.problems) + f"\n\n{block.text}"
    assert checker.calls_checked >= 1, f"{block.id}: no fedlib call was checked"


@pytest.mark.parametrize("block", [b for b in _blocks_of("python") if b.values[0].key in EXECUTED])
def test_python_recipe_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path / "figures"))
    spec = EXECUTED[block.key]
    module = importlib.import_module(block.module)
    ns = {**public_index(), **{k: v for k, v in vars(module).items() if not k.startswith("__")}}
    ns.update(spec.fixtures())
    ns["__name__"] = "recipe"
    exec(compile(_python_source(block), f"<{block.id}>", "exec"), ns)
    spec.check(ns)


@pytest.mark.parametrize("block", _blocks_of("json"))
def test_json_layout_matches_what_the_library_writes(block):
    JSON_CHECKS[block.key](block)


@pytest.mark.parametrize("block", _blocks_of("layout"))
def test_text_layout_matches_the_code(block):
    LAYOUT_CHECKS[block.key](block)


def _docstring_commands() -> list:
    out = []
    for block in all_blocks():
        if classify(block) != "shell":
            continue
        for line in _logical_lines(block.text):
            out.append(pytest.param(line, id=f"{block.where}: {line[:60]}"))
    return out


@pytest.mark.parametrize("line", _docstring_commands())
def test_docstring_command_parses(line):
    argv = fedlib_argv(line)
    assert argv is not None, f"a shell block's line is not a `python -m fedlib` command (unchecked): {line}"
    for expanded in expand_argv(argv):
        parse_command(expanded)


def test_the_argument_parsing_catches_stale_flags():
    """The check above is not vacuous: an unknown flag or a bad choice fails."""
    with pytest.raises(AssertionError, match="unrecognized arguments"):
        parse_command(fedlib_argv("python -m fedlib run synthetic --no-such-flag 1"))
    with pytest.raises(AssertionError, match="invalid choice"):
        parse_command(fedlib_argv("OMP_NUM_THREADS=2 python -m fedlib run synthetic --algorithm nope"))
    assert fedlib_argv("torchrun --nproc_per_node 2 -m fedlib run synthetic  # comment") == ["run", "synthetic"]


def test_the_static_checker_catches_stale_calls():
    block = Block("fedlib.optim", "test", "test::", "from fedlib.solvers import momentum_sgd, no_such_name\n"
                  "s = momentum_sgd(lr=0.1, momentun=0.9)\n"
                  "algo = make_algorithm('fednova', s)\n"
                  "algo.init([1.0], num_clients=2, rounds=3)\n"
                  "algo.no_such_method()\n"
                  "undefined_thing(1)\n")
    checker = StaticChecker(block, set())
    checker.visit(ast.parse(block.text))
    text = "\n".join(checker.problems)
    for expected in ("no_such_name", "momentun", "rounds", "no_such_method", "undefined_thing"):
        assert expected in text, (expected, text)


# ----- the book's chapters (README.md and book/intro.md: tests/test_readme.py)
def _chapter_commands() -> list:
    out = []
    for nb_path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            source = "".join(cell["source"])
            texts = re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", source, flags=re.S)
            texts += [t for t in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", source, flags=re.S))]
            for text in texts:
                for line in _logical_lines(text):
                    if fedlib_argv(line) is not None:
                        out.append(pytest.param(line, id=f"{nb_path.name}: {line[:60]}"))
    for md in sorted((ROOT / "book").glob("*.md")):
        if md.name == "intro.md":
            continue
        for text in re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", md.read_text(), flags=re.S):
            out += [pytest.param(ln, id=f"{md.name}: {ln[:60]}") for ln in _logical_lines(text)
                    if fedlib_argv(ln) is not None]
    return out


@pytest.mark.parametrize("line", _chapter_commands())
def test_chapter_command_parses(line):
    for expanded in expand_argv(fedlib_argv(line)):
        parse_command(expanded)


def test_there_are_chapter_commands():
    assert len(_chapter_commands()) >= 2

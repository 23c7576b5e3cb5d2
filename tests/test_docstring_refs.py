"""The book's API page renders public docstrings with Sphinx's nitpicky ``-n -W``: a cross-reference to a
private name (``:func:`_helper```), which autodoc does not document, fails the whole book build. Checked here
in a second rather than after the chapters' minutes of execution."""
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import fedlib

ROLE = re.compile(r":(?:py:)?(?:func|meth|attr|class|data|obj|mod):`~?([^`<]+?)(?:\s*<[^>]*>)?`")


def _public_docstrings():
    for info in pkgutil.walk_packages(fedlib.__path__, "fedlib."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        yield info.name, module.__doc__
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{info.name}.{name}", obj.__doc__
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                        yield f"{info.name}.{name}.{attr}", member.__doc__


def test_public_docstrings_do_not_cross_reference_private_names():
    bad = []
    for where, doc in _public_docstrings():
        for target in ROLE.findall(doc or ""):
            if any(part.startswith("_") and not part.startswith("__") for part in target.strip().split(".")):
                bad.append(f"{where}: {target}")
    assert not bad, "cross-references to private names (use ``name`` instead): " + "; ".join(bad)


def _string_tokens(path):
    import tokenize

    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.STRING:
                yield tok


def test_latex_in_docstrings_is_in_raw_strings():
    r"""A non-raw docstring turns :math:`\beta` into a backspace and "eta" (``\b``), :math:`\tau` into a
    tab and "au": MathJax then fails on the API page, which only the browser test sees. Any string
    holding LaTeX markup with a single backslash before a letter must be raw (or double the backslash)."""
    from pathlib import Path

    single = re.compile(r"(?<!\\)(?:\\\\)*\\[A-Za-z]")
    bad = []
    for path in sorted(Path(fedlib.__file__).parent.rglob("*.py")):
        for tok in _string_tokens(path):
            prefix = re.match(r"[A-Za-z]*", tok.string).group(0).lower()
            if "r" in prefix or not re.search(r":math:`|\.\. math::|\$", tok.string):
                continue
            if single.search(tok.string):
                bad.append(f"{path.name}:{tok.start[0]}")
    assert not bad, "LaTeX with single backslashes in non-raw strings: " + ", ".join(bad)


def test_bare_references_name_exported_names():
    """A bare ``:data:`NAME``` (or func/class/...) in a module's docstring resolves in that module, and
    the API page documents only the module's ``__all__``: ``check_own_step``'s reference to
    ``OWN_STEP_PROBES``, a constant left out of ``__all__``, failed the whole ``-n -W`` book build."""
    on_page = set(re.findall(r"automodule::\s*(\S+)", (Path(__file__).parents[1] / "book" / "api.md").read_text()))
    assert len(on_page) > 30
    bad = []
    for where, doc in _public_docstrings():
        parts = where.split(".")
        module = next(importlib.import_module(".".join(parts[:k])) for k in range(len(parts), 0, -1)
                      if ".".join(parts[:k]) in sys.modules
                      and inspect.ismodule(sys.modules[".".join(parts[:k])]))
        exported = getattr(module, "__all__", None)
        if exported is None or module.__name__ not in on_page:
            continue
        for target in ROLE.findall(doc or ""):
            target = target.strip()
            if "." in target or target.startswith("_"):
                continue
            value = getattr(module, target, None)
            if value is not None and not inspect.ismodule(value) and target not in exported \
                    and getattr(value, "__module__", module.__name__) == module.__name__:
                bad.append(f"{where}: {target}")
    assert not bad, "references to names the API page does not show (add them to __all__): " + "; ".join(bad)


def test_class_attribute_doc_comments_have_no_colon_in_their_first_line():
    """Napoleon reads the first line of a class attribute's ``#:`` comment as ``type: description``: the comment of
    ``OwnStepChecks.MAX_REMEMBERED``, 'Solvers remembered at most (...): a ``solver_at`` ...', became three
    unresolved class references and failed the whole ``-n -W`` book build (CI at 3ae5558)."""
    roles_and_code = re.compile(r":(?:[a-z]+:)+`[^`]*`|``[^`]*``|`[^`]*`")
    bad = []
    for path in sorted(Path(fedlib.__file__).parent.rglob("*.py")):
        lines = path.read_text().splitlines()
        for k, line in enumerate(lines):
            first = line.startswith((" ", "\t")) and line.strip().startswith("#:") and not (
                k and lines[k - 1].strip().startswith("#:"))
            if first and re.search(r":(\s|$)", roles_and_code.sub("x", line.strip()[2:])):
                bad.append(f"{path.name}:{k + 1}")
    assert not bad, "class attribute doc comments with a colon in their first line: " + ", ".join(bad)

r"""Section titles in the book's search, without LaTeX.

Sphinx keys the search index's section titles (``alltitles`` in ``searchindex.js``) by the title's text, and the
text of a math role is its LaTeX: the search listed "Where FedAvg’s error comes from: \chi^2_{p\|w} and
\tau_{\text{eff}}". After the HTML build, each such title is rewritten as it reads in fedlib's code
(:func:`plain_math`): "... chi^2_p||w and tau_eff", which is also what a reader types into the search box
(``tau_eff``, ``a_norm``, ``chi2`` are fedlib's names; "tau" still finds "tau_i"). The titles on the pages keep
their rendered math.
"""
import json
import re
from pathlib import Path

_TEXT = re.compile(r"\\(?:text|mathrm|mathit|mathbf|mathbb|mathcal|operatorname)\{([^{}]*)\}")
_TOKEN = re.compile(r"\\\||\\[,;:! ]|\\([A-Za-z]+)")
#: macros written as a symbol, not as their name
_SYMBOLS = {"cdot": "*", "times": "x", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "neq": "!=",
            "to": "->", "approx": "~", "sim": "~", "infty": "inf", "in": "in", "ldots": "...", "dots": "...",
            "left": "", "right": "", "big": "", "Big": "", "mathbb": "", "mathcal": "", "boldsymbol": ""}


def plain_math(text: str) -> str:
    r"""``text`` with its LaTeX spelled as fedlib's code spells it: a macro becomes its name (``\tau`` -> ``tau``,
    ``\text{eff}`` -> ``eff``), except a few written as their symbol (``\le`` -> ``<=``, ``\cdot`` -> ``*``) or
    dropped (``\left``, ``\mathbb``), ``\|`` becomes ``||``, braces go, a spacing macro becomes a space (``\!``
    nothing), and a name that would run into the word before it is set apart (``\chi^2\kappa^2`` -> ``chi^2 kappa^2``).

    >>> plain_math(r"Where FedAvg’s error comes from: \chi^2_{p\|w} and \tau_{\text{eff}}")
    'Where FedAvg’s error comes from: chi^2_p||w and tau_eff'
    >>> plain_math(r"\Delta_i = -\eta G_i a_i, the \chi^2\kappa^2 floor, O(\eta), x^*")
    'Delta_i = -eta G_i a_i, the chi^2 kappa^2 floor, O(eta), x^*'
    """
    text = _TEXT.sub(r"\1", text)
    out: list = []

    def emit(word: str) -> None:
        if word and out and out[-1][-1:].isalnum() and word[0].isalnum():
            out.append(" ")
        out.append(word)

    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        token = m.group(0)
        if token == "\\|":
            emit("||")
        elif m.group(1) is None:  # \, \; \: \! and "\ ": spacing
            out.append(" " if token != "\\!" else "")
        else:
            emit(_SYMBOLS.get(m.group(1), m.group(1)))
        pos = m.end()
    out.append(text[pos:])
    return re.sub(r" {2,}", " ", re.sub(r"[{}]", "", "".join(out))).strip()


def rewrite_index(path: Path) -> int:
    """Rewrite the section titles of the search index ``path`` (``Search.setIndex({...})``) with :func:`plain_math`;
    the number of titles changed. Two titles that read alike afterwards share one entry (their sections listed
    together), as Sphinx lists the sections of one title."""
    raw = path.read_text(encoding="utf-8")
    head, tail = "Search.setIndex(", ")"
    if not (raw.startswith(head) and raw.rstrip().endswith(tail)):
        raise ValueError(f"{path}: not a Sphinx search index (expected Search.setIndex(...))")
    index = json.loads(raw[len(head):raw.rstrip().rindex(tail)])
    titles, changed = {}, 0
    for title, where in index["alltitles"].items():
        plain = plain_math(title)
        changed += plain != title
        titles.setdefault(plain, []).extend(w for w in where if w not in titles.get(plain, []))
    index["alltitles"] = titles
    path.write_text(head + json.dumps(index, sort_keys=True) + tail, encoding="utf-8")  # as Sphinx writes it
    return changed


def _after_build(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        index = Path(app.outdir) / "searchindex.js"
        if index.is_file():
            rewrite_index(index)


def setup(app):
    app.connect("build-finished", _after_build)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

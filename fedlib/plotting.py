"""Figure helpers for the book: one place that knows where ``figures/`` is (and that only the
``full`` profile writes the committed figures).

Used by chapters 1, 2, 3, 4, 5, 6, 7, 8, 9 and 10.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from ._validate import check_int

__all__ = ["ALGORITHM_COLORS", "BOOK_BUILD_ENV", "algorithm_color", "figures_dir", "save_figure"]

#: The environment variable ``scripts/build_book.py`` sets to the profile it executes (``"full"`` for
#: ``PROFILE=full make book``): :func:`save_figure` writes a ``full``-profile figure to the committed
#: ``figures/`` only when it is ``"full"``, so that only the book's full build replaces committed figures.
BOOK_BUILD_ENV = "FEDLIB_BOOK_BUILD"

#: One colour per algorithm family in every figure of the book (FedAvg blue and FedNova red,
#: as in the paper's Figure 7, "FedNova (red curve) outperforms FedAvg (blue curve)").
#: Variants of a family (momentum, VR, fixed-time rounds...) share its colour or take a
#: free one, and differ by line style.
ALGORITHM_COLORS = {
    "fedavg": "C0",
    "fedprox": "C1",
    "vrlsgd": "C2",
    "fednova": "C3",
    "scaffold": "C4",
}


def algorithm_color(label: str):
    """The :data:`ALGORITHM_COLORS` colour of the family that ``label`` names or starts with
    (case and surrounding spaces ignored: ``"FedNova"``, ``"fednova-vr"``, ``"FedNova, m=4"`` are all FedNova's);
    ``None`` (matplotlib's next colour) for a label of no listed family.

    >>> algorithm_color("FedNova-prox"), algorithm_color("FedAvg momentum"), algorithm_color("SGD")
    ('C3', 'C0', None)
    """
    key = str(label).strip().lower()
    names = [n for n in ALGORITHM_COLORS if key.startswith(n)]
    return ALGORITHM_COLORS[max(names, key=len)] if names else None


def figures_dir() -> Path:
    """``$FEDLIB_FIGURES`` if set, else ``figures/`` at the repository root of this
    source checkout (next to the ``fedlib`` package), else ``./figures``; created if missing.

    >>> import tempfile
    >>> from unittest import mock
    >>> with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"FEDLIB_FIGURES": tmp}):
    ...     figures_dir() == Path(tmp)
    True
    """
    env = os.environ.get("FEDLIB_FIGURES")
    if env:
        path = Path(env)
    else:
        root = Path(__file__).resolve().parents[1]
        path = root / "figures" if (root / "pyproject.toml").exists() else Path.cwd() / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_figure(fig, name: str, *, profile: Optional[str] = None, seed: Optional[int] = None) -> list[Path]:
    """Save ``fig`` as ``<folder>/<name>.png`` (150 dpi) and ``.svg``; return the paths.

    ``name`` is a string naming a file in that folder, without an extension (no ``/``, ``\\`` or NUL,
    not ``.`` or ``..``; a ``ValueError`` otherwise).
    ``<folder>`` is :func:`figures_dir` for ``profile=None`` (your own notebooks), and for
    ``profile="full"`` at seed 0 (or ``None``) only inside the book's full build
    (``PROFILE=full make book``: ``scripts/build_book.py`` sets ``$FEDLIB_BOOK_BUILD`` to the
    profile it executes, see :data:`BOOK_BUILD_ENV`), which draws the committed figures. Anywhere
    else a profile writes to its subfolder ``<profile>/`` (``figures/ci/``, ``figures/full/``,
    ignored by git), and a ``seed`` other than ``None`` or 0 adds ``-seed<seed>`` to it
    (``figures/full-seed3/``, ``figures/ci-seed3/``; ``figures/seed3/`` without a profile). So a
    chapter re-executed by hand (papermill, whatever its parameters: another seed, ``data_seed``,
    sizes) or a quick ``ci`` run never replaces a committed figure.

    In a chapter (``profile`` and ``seed`` come from its ``parameters`` cell)::

        save_figure(fig, "ch02_figure2_quadratic", profile=profile, seed=seed)
        # PROFILE=full make book -> figures/ch02_figure2_quadratic.{png,svg};
        # papermill -p profile full -> figures/full/...; ci -> figures/ci/...; seed 3 -> figures/full-seed3/...

    Here into a temporary folder (``$FEDLIB_FIGURES``), at the ``ci`` profile:

    >>> import tempfile
    >>> from unittest import mock
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 1.5))
    >>> _ = fig.add_subplot().plot([0, 1], [1, 0], color=algorithm_color("FedNova"))
    >>> with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {"FEDLIB_FIGURES": tmp}):
    ...     [p.relative_to(tmp).as_posix() for p in save_figure(fig, "demo", profile="ci")]
    ['ci/demo.png', 'ci/demo.svg']
    >>> save_figure(fig, "demo.png")
    Traceback (most recent call last):
    ...
    ValueError: name must be a bare file stem like 'fig2_quadratics', got 'demo.png'
    """
    if (not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0")
            or name.lower().endswith((".png", ".svg"))):
        raise ValueError(f"name must be a bare file stem like 'fig2_quadratics', got {name!r}")
    if profile is not None and (not isinstance(profile, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", profile)):
        raise ValueError(f"profile must be None or a profile name such as 'ci' or 'full' (letters, digits, '-', '_'), "
                         f"got {profile!r}")
    if seed is not None:
        seed = check_int("seed", seed)
    import matplotlib

    folder = figures_dir()
    committed = profile == "full" and os.environ.get(BOOK_BUILD_ENV) == "full"  # only the book's full build
    sub = None if profile is None or committed else profile
    if seed:  # another seed's figures never replace the committed ones (drawn at seed 0)
        sub = f"{profile}-seed{seed}" if profile is not None else f"seed{seed}"
    if sub is not None:
        folder = folder / sub
        folder.mkdir(exist_ok=True)
    import io

    from ._io import atomic_write

    # Fixed SVG ids and no timestamps: re-running a chapter rewrites identical files. Both are rendered
    # in memory before either is written, each written atomically: an interrupted chapter leaves the
    # previous pair (not a truncated SVG, nor a new PNG next to an old SVG).
    rendered = {}
    with matplotlib.rc_context({"svg.hashsalt": "fednova-book"}):
        for ext, kw in (("png", {"dpi": 150, "metadata": {"Software": None}}),
                        ("svg", {"metadata": {"Date": None, "Creator": None}})):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, bbox_inches="tight", **kw)
            rendered[folder / f"{name}.{ext}"] = buf.getvalue()
    return [atomic_write(path, blob) for path, blob in rendered.items()]

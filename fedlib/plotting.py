"""Figure helpers for the book: one place that knows where ``figures/`` is."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["figures_dir", "save_figure"]


def figures_dir() -> Path:
    """``$FEDLIB_FIGURES`` if set, else ``figures/`` at the repository root of this
    source checkout (next to the ``fedlib`` package), else ``./figures``."""
    env = os.environ.get("FEDLIB_FIGURES")
    if env:
        path = Path(env)
    else:
        root = Path(__file__).resolve().parents[1]
        path = root / "figures" if (root / "pyproject.toml").exists() else Path.cwd() / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_figure(fig, name: str) -> list[Path]:
    """Save ``fig`` as ``figures/<name>.png`` (150 dpi) and ``.svg``; return the paths."""
    if not name or "/" in name or name.endswith((".png", ".svg")):
        raise ValueError(f"name must be a bare file stem like 'fig2_quadratics', got {name!r}")
    import matplotlib

    folder = figures_dir()
    out = []
    # Fixed SVG ids and no timestamps: re-running a chapter rewrites identical files.
    with matplotlib.rc_context({"svg.hashsalt": "fednova-book"}):
        for ext, kw in (("png", {"dpi": 150, "metadata": {"Software": None}}),
                        ("svg", {"metadata": {"Date": None, "Creator": None}})):
            path = folder / f"{name}.{ext}"
            fig.savefig(path, bbox_inches="tight", **kw)
            out.append(path)
    return out

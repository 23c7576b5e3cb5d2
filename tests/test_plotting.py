"""fedlib.plotting: where figures go, and one colour per algorithm family in every chapter; an
interrupted save_figure keeps the old pair."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fedlib.experiments import acceleration, quadratic, synthetic  # noqa: E402
from fedlib.plotting import ALGORITHM_COLORS, algorithm_color, save_figure  # noqa: E402


def test_every_chapter_palette_uses_the_family_colours():
    # FedAvg blue and FedNova red, as in the paper's Figure 7
    assert ALGORITHM_COLORS["fedavg"] == "C0" and ALGORITHM_COLORS["fednova"] == "C3"
    assert len(set(ALGORITHM_COLORS.values())) == len(ALGORITHM_COLORS)
    for styles in (quadratic.STYLES, acceleration.STYLES):
        for name, style in styles.items():  # the families, and local momentum drawn in its family's colour
            if name in ALGORITHM_COLORS or name in ("fedavg-momentum", "fednova-momentum"):
                assert style["color"] == algorithm_color(name), (name, style)
    for label, style in synthetic.LABEL_STYLE.items():
        assert style["color"] == algorithm_color(label)


@pytest.mark.parametrize("label, color", [("FedNova", "C3"), ("fednova-vr", "C3"), (" FedAvg, m=4", "C0"),
                                          ("FedProx", "C1"), ("SCAFFOLD", "C4"), ("SGD", None), ("", None)])
def test_algorithm_color_by_family(label, color):
    assert algorithm_color(label) == color


def test_save_figure_writes_png_and_svg_deterministically(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0], color=algorithm_color("FedNova"))
    paths = save_figure(fig, "probe")
    assert [p.name for p in paths] == ["probe.png", "probe.svg"]
    first = [p.read_bytes() for p in paths]
    save_figure(fig, "probe")
    assert [p.read_bytes() for p in paths] == first  # no timestamps: re-running a chapter rewrites identical files
    plt.close(fig)
    for bad in ("", "a/b", "x.png"):
        with pytest.raises(ValueError, match="bare file stem"):
            save_figure(fig, bad)


def test_save_figure_names_a_name_that_is_no_file_stem(tmp_path, monkeypatch):
    """Was: a name that is no string failed inside the check ("'list' object has no attribute 'endswith'", for 3
    "argument of type 'int' is not iterable", for a tensor RuntimeError); 'a\\x00b' failed in the file system
    ('embedded null byte'); '.' and '..' wrote the hidden files '..png' and '...png', 'a\\b' a file with a
    backslash (a subfolder on Windows), 'x.PNG' the file 'x.PNG.png'."""
    import torch

    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    for bad in (["a"], 3, b"ab", torch.ones(2), None, "a\x00b", ".", "..", "a\\b", "x.PNG", "x.Svg"):
        with pytest.raises(ValueError, match=r"^name must be a bare file stem like 'fig2_quadratics', got "):
            save_figure(fig, bad)
    assert list(tmp_path.iterdir()) == []
    assert [p.name for p in save_figure(fig, "ch01 ünï.v2")] == ["ch01 ünï.v2.png", "ch01 ünï.v2.svg"]
    plt.close(fig)


def test_save_figure_keeps_other_profiles_out_of_the_committed_folder(tmp_path, monkeypatch):
    """full (in the book's full build) and None write to figures/; any other profile to figures/<profile>/
    (git-ignored), so a ci run never replaces the committed full-profile figures."""
    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path))
    monkeypatch.setenv("FEDLIB_BOOK_BUILD", "full")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert save_figure(fig, "a", profile="full")[0] == tmp_path / "a.png"
    assert save_figure(fig, "a")[1] == tmp_path / "a.svg"
    assert [p.relative_to(tmp_path).as_posix() for p in save_figure(fig, "a", profile="ci")] == ["ci/a.png", "ci/a.svg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "a.svg", "ci"]
    for bad in ("", "../x", "a/b", 3, "full profile"):
        with pytest.raises(ValueError, match="profile must be"):
            save_figure(fig, "a", profile=bad)
    plt.close(fig)


def test_save_figure_keeps_other_seeds_out_of_the_committed_folder(tmp_path, monkeypatch):
    """Chapter 1 re-executed as README says (papermill ... -p profile full -p seed 5) replaced the committed
    figures/ch01_weights_fedavg_fednova.{png,svg} with seed 5's: a seed other than 0 (the committed one) now
    writes to figures/<profile>-seed<seed>/ (git-ignored); seed 0 and None keep the profile's folder."""
    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path))
    monkeypatch.setenv("FEDLIB_BOOK_BUILD", "full")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert save_figure(fig, "a", profile="full", seed=0)[0] == tmp_path / "a.png"
    assert save_figure(fig, "a", profile="ci", seed=0)[0] == tmp_path / "ci" / "a.png"
    assert [p.relative_to(tmp_path).as_posix() for p in save_figure(fig, "a", profile="full", seed=5)] == \
        ["full-seed5/a.png", "full-seed5/a.svg"]
    assert save_figure(fig, "a", profile="ci", seed=np.int64(3))[0] == tmp_path / "ci-seed3" / "a.png"
    assert save_figure(fig, "a", seed=2)[0] == tmp_path / "seed2" / "a.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "a.svg", "ci", "ci-seed3", "full-seed5", "seed2"]
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="seed must be"):
            save_figure(fig, "a", profile="full", seed=bad)
    plt.close(fig)


def test_committed_figures_ignore_other_profiles():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    res = subprocess.run(["git", "check-ignore", "-q", "figures/ci/x.png"], cwd=root)
    if res.returncode == 128:
        pytest.skip("not a git checkout")
    assert res.returncode == 0, "figures/<profile>/ must be ignored by git"
    assert subprocess.run(["git", "check-ignore", "-q", "figures/x.png"], cwd=root).returncode == 1


def test_save_figure_interrupted_keeps_the_old_pair(tmp_path, monkeypatch):
    """The SVG failing to render (Ctrl-C, a full disk) left a truncated SVG and a new PNG next to it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedlib import plotting

    monkeypatch.setattr(plotting, "figures_dir", lambda: tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    png, svg = plotting.save_figure(fig, "f")
    old = (png.read_bytes(), svg.read_bytes())
    ax.plot([1, 0])
    real = fig.savefig

    def fail_on_svg(buf, format=None, **kw):
        if format == "svg":
            raise KeyboardInterrupt
        return real(buf, format=format, **kw)

    monkeypatch.setattr(fig, "savefig", fail_on_svg)
    with pytest.raises(KeyboardInterrupt):
        plotting.save_figure(fig, "f")
    assert (png.read_bytes(), svg.read_bytes()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]
    plt.close(fig)


def test_figures_dir_without_the_variable(monkeypatch, tmp_path):
    """Without $FEDLIB_FIGURES (or with it empty): ``figures/`` beside the fedlib package of a source checkout
    (the folder holding pyproject.toml), and for an installed copy (no pyproject.toml beside the package)
    ``./figures``, created."""
    from pathlib import Path

    from fedlib import plotting

    monkeypatch.setenv("FEDLIB_FIGURES", "")
    monkeypatch.chdir(tmp_path)  # elsewhere than the checkout
    checkout = Path(plotting.__file__).resolve().parents[1]
    assert (checkout / "pyproject.toml").exists()
    assert plotting.figures_dir() == checkout / "figures"
    monkeypatch.delenv("FEDLIB_FIGURES")
    assert plotting.figures_dir() == checkout / "figures"
    installed = tmp_path / "site-packages" / "fedlib"
    installed.mkdir(parents=True)
    monkeypatch.setattr(plotting, "__file__", str(installed / "plotting.py"))
    assert not (tmp_path / "figures").exists()
    assert plotting.figures_dir() == Path.cwd() / "figures" and (tmp_path / "figures").is_dir()


@pytest.mark.parametrize("build", [None, "ci", "FULL"])
def test_only_the_books_full_build_writes_full_profile_figures_to_the_committed_folder(tmp_path, monkeypatch, build):
    """A chapter re-executed by hand at the full profile and seed 0 with another parameter changed (papermill -p profile
    full -p data_seed 3, or other sizes) replaced the committed figures. Outside the book's full build
    ($FEDLIB_BOOK_BUILD = full, set by scripts/build_book.py) the full profile writes to figures/full/ (git-ignored)."""
    monkeypatch.setenv("FEDLIB_FIGURES", str(tmp_path))
    if build is None:
        monkeypatch.delenv("FEDLIB_BOOK_BUILD", raising=False)
    else:
        monkeypatch.setenv("FEDLIB_BOOK_BUILD", build)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert [p.relative_to(tmp_path).as_posix() for p in save_figure(fig, "a", profile="full", seed=0)] == \
        ["full/a.png", "full/a.svg"]
    assert save_figure(fig, "a", profile="full", seed=4)[0] == tmp_path / "full-seed4" / "a.png"
    assert save_figure(fig, "a")[0] == tmp_path / "a.png"  # your own notebook: figures/ itself
    monkeypatch.setenv("FEDLIB_BOOK_BUILD", "full")
    assert save_figure(fig, "a", profile="full", seed=0)[0] == tmp_path / "a.png"
    plt.close(fig)

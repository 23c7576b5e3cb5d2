"""``constraints.txt`` pins the environment the book and the tests pass with (``make env`` installs
with ``pip install -c constraints.txt``): every requirement of ``pyproject.toml`` is pinned there, at a
version its range admits, and the repository's own ``.venv`` holds exactly the pinned versions."""
from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the pinned environment's)

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt: {line!r} is not NAME==VERSION"
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt pins {name} twice"
        pins[key] = Version(version)
    return pins


def _requirements() -> list:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_every_requirement_is_pinned_within_its_range():
    pins = _pins()
    reqs = _requirements()
    assert len(reqs) >= 10
    for req in reqs:
        key = canonicalize_name(req.name)
        assert key in pins, f"{req} of pyproject.toml is not pinned in constraints.txt (make lock)"
        assert req.specifier.contains(pins[key], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[key]}, outside pyproject.toml's {req}")


def test_the_pins_do_not_include_fedlib_itself():
    assert "fedlib" not in _pins()


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="only the repository's own .venv (made by `make env`) must match the pins")
def test_the_venv_holds_the_pinned_versions():
    pins = _pins()
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}
    missing = sorted(k for k in pins if k not in installed)
    differ = sorted(f"{k} {installed[k]} (pinned {v})" for k, v in pins.items() if k in installed and installed[k] != v)
    assert not missing and not differ, f"run `make env` (or `make lock`): missing {missing}, differ {differ}"

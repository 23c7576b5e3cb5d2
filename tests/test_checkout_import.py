"""The suite tests the checkout it lives in, not another installed copy of fedlib.

An editable install made from another clone (or an older ``pip install``) puts a
``fedlib`` on ``sys.path`` or ``sys.meta_path``; ``pytest`` started as a console script
does not put the checkout's root on ``sys.path`` by itself, so without
``pythonpath = ["."]`` in ``pyproject.toml`` the tests would silently check that copy.
"""
from pathlib import Path

import fedlib

ROOT = Path(__file__).resolve().parents[1]


def test_tests_import_this_checkouts_fedlib():
    assert Path(fedlib.__file__).resolve().parent == ROOT / "fedlib"

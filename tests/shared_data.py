"""Where the tests find the real CIFAR-10: ``$FEDLIB_CIFAR_ROOT``, else ``shared/data`` beside
the checkout (as laid out for developers and CI), which holds ``cifar-10-batches-py/``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REAL_ROOT = Path(os.environ.get("FEDLIB_CIFAR_ROOT") or Path(__file__).resolve().parents[2] / "shared" / "data")
needs_real = pytest.mark.skipif(not (REAL_ROOT / "cifar-10-batches-py").is_dir(),
                                reason=f"real CIFAR-10 not present under {REAL_ROOT}")

"""One torch thread for the tests of tiny networks (imported by the test modules that train them)."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny kernels: one thread is faster and robust to a busy, shared CI machine; the count is
    restored after the module."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

"""Provenance's device field names the device a run used (results.device_name)."""
import torch

from fedlib.results import device_name


def test_a_device_that_is_neither_cpu_nor_cuda_is_not_recorded_as_the_cpu():
    """Before: every device string not starting with 'cuda' came back as 'cpu' (an MPS or XPU run
    would have carried 'cpu' in its provenance)."""
    assert device_name("mps") == "mps"
    assert device_name("xpu:0") == "xpu:0"
    assert device_name(torch.device("meta")) == "meta"


def test_cpu_devices_are_the_cpu():
    assert device_name() == "cpu"
    assert device_name("cpu") == device_name("cpu:0") == device_name(torch.device("cpu")) == "cpu"

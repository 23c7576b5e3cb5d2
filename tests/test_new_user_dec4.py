"""A new user's journeys through README.md, the module docstrings and ``--help`` (helper C, Dec 4):
what misled them, what failed without saying what to do, what gave a silent wrong result."""
from __future__ import annotations

import urllib.error

import pytest


# --------------------------------------------------------------------------- CIFAR-10 without network
def test_cifar10_download_without_network_says_what_to_do(tmp_path, monkeypatch):
    """load_cifar10(root, download=True) on a machine without access to the CIFAR mirror raised
    torchvision's bare ``URLError: <urlopen error [Errno -2] Name or service not known>`` (and the CLI
    printed just that); it now names the address, the folder and how to install the archive by hand."""
    import torchvision

    from fedlib.data import cifar10 as cifar

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", type("CIFAR10", (), {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "__new__": offline}))
    with pytest.raises(OSError) as info:
        cifar.load_cifar10(tmp_path, download=True)
    message = str(info.value)
    assert "Name or service not known" in message  # the cause is kept
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in message
    assert f"tar -xzf cifar-10-python.tar.gz -C {tmp_path}" in message
    assert str(tmp_path / "cifar-10-batches-py") in message
    assert isinstance(info.value.__cause__, urllib.error.URLError)


def test_cifar10_download_failure_on_the_command_line(tmp_path, monkeypatch, capsys):
    """The same through ``python -m fedlib run cifar10 --download``: one line that says what to do, exit 1."""
    import torchvision

    from fedlib.cli import main

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", type("CIFAR10", (), {"__new__": offline}))
    code = main(["run", "cifar10", "--data-root", str(tmp_path), "--download", "--rounds", "1", "--width", "0.05",
                 "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "CIFAR-10 download into" in err and "extract it into" in err, err
    assert not (tmp_path / "c.json").exists()

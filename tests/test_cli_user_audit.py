"""The command line as a user meets it: failures of the file system, odd paths, hand-edited results."""
import errno

import pytest

from fedlib.cli import main

TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_a_write_failure_after_training_is_a_one_line_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    # e.g. the disk filled up during the run: the result cannot be staged next to --out
    import fedlib._io as io

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.tempfile, "mkstemp", full)
    out = tmp_path / "r.json"
    rc = main([*TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "No space left on device" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("python -m fedlib run synthetic: error:")
    assert not out.exists() and list(tmp_path.iterdir()) == []

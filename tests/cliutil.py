"""Running ``python -m fedlib`` in this process, for the command-line tests (imported by the test
modules that need it), a Ctrl-C right after a checkpoint is saved, and an edited copy of a result file."""
from __future__ import annotations

import contextlib
import io
import json


def cli_exit(argv) -> tuple:
    """``(exit status, stdout, stderr)`` of ``fedlib.cli.main(argv)``, an argparse ``SystemExit``
    included."""
    from fedlib.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def ctrl_c_after_saving(monkeypatch):
    """Make ``fedlib.checkpoint.save_checkpoint`` raise ``KeyboardInterrupt`` right after it has written its
    checkpoint (a Ctrl-C just after a save), through ``monkeypatch``; returns the real function, for the test
    to put back (``monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)``) before it resumes."""
    import fedlib.checkpoint

    real_save = fedlib.checkpoint.save_checkpoint

    def save_then_interrupt(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_then_interrupt)
    return real_save


def full_disk_at_round(monkeypatch, round_done: int) -> None:
    """Make ``fedlib.checkpoint.save_checkpoint`` fail as on a full disk (``OSError`` ENOSPC naming the file) when it
    writes the checkpoint of round ``round_done``, through ``monkeypatch``; the other rounds' are written."""
    import errno

    import fedlib.checkpoint

    real_save = fedlib.checkpoint.save_checkpoint

    def save_unless_full(path, **kwargs):
        if kwargs["round_done"] == round_done:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_save(path, **kwargs)

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_unless_full)


def edited_result(path, tmp_path, edit):
    """A copy of the result JSON at ``path`` in ``tmp_path`` with ``edit(doc)`` applied to its document (the
    original is left as it is); returns the copy's path."""
    doc = json.loads(path.read_text())
    edit(doc)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(doc))
    return out

"""Running ``python -m fedlib`` in this process, for the command-line tests (imported by the test
modules that need it), and a Ctrl-C right after a checkpoint is saved."""
from __future__ import annotations

import contextlib
import io


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

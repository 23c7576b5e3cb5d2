"""Running ``python -m fedlib`` in this process, for the command-line tests (imported by the test
modules that need it)."""
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

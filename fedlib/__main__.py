"""``python -m fedlib``: see :mod:`fedlib.cli`."""
import sys

from .cli import main

sys.exit(main())

"""``python -m fedlib.cli`` (same as ``python -m fedlib``)."""
import sys

from . import main

sys.exit(main())

"""``python -m lmbridge``: the same as the ``lmbridge`` command."""

import sys

from .cli import main

sys.exit(main())

"""``python -m mdhom``: the ``mdhom`` command where the console script is not on PATH."""

import sys

from mdhom.cli import main

sys.exit(main())

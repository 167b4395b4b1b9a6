"""Where the real datasets the tests read are: ``tests/data`` in the project (small copies, so the tests run
from a plain clone: see ``tests/data/README.md``), or ``$MDHOM_DATASETS`` (e.g. the full ``../shared/datasets``).
Tests that need them skip with this path in the reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ.get("MDHOM_DATASETS") or Path(__file__).resolve().parent / "data")

# The project keeps the first 300 of enron's 1702 rows (0.9 MB); $MDHOM_DATASETS may hold the whole file.
ENRON = next((p for p in (DATA / "enron-300.arff", DATA / "enron.arff") if p.exists()), DATA / "enron-300.arff")

"""Where the shared real datasets are: ``../shared/datasets`` beside the checkout (every machine and CI have
it there), or ``$MDHOM_DATASETS``. Tests that need them skip with this path in the reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ.get("MDHOM_DATASETS") or Path(__file__).resolve().parents[2] / "shared" / "datasets")

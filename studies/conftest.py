"""
The studies' tests import the core (train, data, model, ...) from the repository root and the studies' own
modules (experiments, sweep, compare, bench, ...) from this folder, as the scripts here do when run.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

"""
The tests that are not lessons: data and metrics, train.py as a user runs it, the command lines, the compiled
GPU path on a CPU, the tutorial. They import the core (train, data, model, ...) from the repository root, as the
scripts there do when run, and one another from this folder.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

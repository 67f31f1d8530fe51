"""
--impl FILE: use a student's model.py or addrop.py in place of the real one, for the lessons (conftest.py)
and for training (python train.py ... --impl exercises/addrop.py). FILE is imported as the module of its
file name before anything imports the real one, so every `import addrop` or `import model` that follows,
checkpoint.py's included, gets the student's code.
"""

import importlib.util
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NAMES = ("model.py", "addrop.py")  # the files the exercises blank


class ImplError(Exception):
    """A --impl FILE that cannot stand in for a module: the message names the file and why."""


def load(path):
    """Import the file at path as the module of its name (model, addrop) and register it in sys.modules."""
    path = Path(path)
    if not path.is_file():
        raise ImplError(f"--impl {path}: no such file")
    if path.name not in NAMES:  # else the real module would be imported, and everything would pass
        raise ImplError(f"--impl {path}: the file must be named {' or '.join(NAMES)}, the module it replaces")
    if path.stem in sys.modules and Path(sys.modules[path.stem].__file__).resolve() != path.resolve():
        raise ImplError(f"--impl {path}: the real {path.name} was imported first; --impl must come before it")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except Exception:  # a syntax error, say: its line, not the import machinery
        del sys.modules[path.stem]
        raise ImplError(f"--impl {path} does not import:\n{traceback.format_exc(limit=-1)}") from None
    return module


def from_argv(argv):
    """Every `--impl FILE` (or --impl=FILE) of a command line, loaded; exits with the message on a bad one."""
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--impl=")]
    paths += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--impl"]
    try:
        return [load(p) for p in paths]
    except ImplError as e:
        sys.exit(f"error: {e}")

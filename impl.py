"""
--impl FILE: a student's model.py or addrop.py in place of the real one, for the lessons (conftest.py) and
for training (train.py), imported as the module of its name before anything imports the real one, so every
`import addrop` or `import model` (checkpoint.py's too) gets it. A FILE that is not, outside the exercise
bodies, what exercises/make.py writes today (older, a line deleted, empty) is refused, naming the lines.
"""

import importlib.util
import sys
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NAMES = ("model.py", "addrop.py")  # the files the exercises blank
_spec = importlib.util.spec_from_file_location("exercises_make", ROOT / "exercises" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


class ImplError(Exception):
    """A --impl FILE that cannot stand in for a module: the message names the file and why."""


def load(path):
    """Import the file at path as the module of its name (model, addrop) and register it in sys.modules."""
    path = Path(path)
    if not path.is_file():
        raise ImplError(f"--impl {path}: no such file")
    if path.name not in NAMES:  # else the real module would be imported, and everything would pass
        raise ImplError(f"--impl {path}: the file must be named {' or '.join(NAMES)}, the module it replaces")
    stale(path)
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


def stale(path):
    """Refuse the file at path unless it is, outside the exercise bodies, what exercises/make.py writes
    today; one that does not parse is left to the import, which names its line."""
    text = path.read_text()
    try:
        diff = make.stale(path.name, text, str(path)) if text.strip() else "it is empty"
    except SyntaxError:
        return
    except LookupError as e:  # an exercise's function is not there
        diff = f"{e.args[0]}, one of the exercises"
    if diff:
        raise ImplError(f"--impl {path} is not what python exercises/make.py writes today, outside the exercise "
                        f"bodies (your answers):\n{diff}\nRun python exercises/make.py: it writes exercises/"
                        f"{path.name} again, keeping your answers (copy yours there first if they live elsewhere)")


def from_argv(argv):
    """Every `--impl FILE` (or --impl=FILE) of a command line, loaded; exits with the message on a bad one."""
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--impl=")]
    paths += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--impl"]
    try:
        return [load(p) for p in paths]
    except ImplError as e:
        sys.exit(f"error: {e}")


def rebound(fn, module, name):
    """fn's code run in `module` (its globals): the real function, calling the student's others. Only a
    plain function can be rebound so: a wrapper's code is the wrapper's, and a closure's cells would be lost."""
    if type(fn) is not types.FunctionType or fn.__closure__ or hasattr(fn, "__wrapped__"):
        raise ImplError(f"--exercise: the real {name} is not a plain function (a wrapper, a closure): make it one")
    new = types.FunctionType(fn.__code__, module.__dict__, fn.__name__, fn.__defaults__)
    new.__kwdefaults__, new.__doc__, new.__qualname__ = fn.__kwdefaults__, fn.__doc__, fn.__qualname__
    return new

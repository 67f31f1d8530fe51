"""
--impl FILE: a student's exercise file (exercises/NN_name.py, written by exercises/make.py) in place of the
real function, for the lessons (exercises/plugin.py) and for training (train.py). The file runs inside the
real module (model or addrop): its function replaces the real one there, and in the module's tables of
choices (addrop.ATTRIBUTIONS, MASKS), so that the real code calls the student's, and the student's calls the
real code, or the student's other exercises where those are given too. --impl exercises takes every exercise
file of the folder (the capstone). The file is also registered as a module of its own name, so that train.py
can say which file stands in. A file that cannot stand in (not an exercise file, no such function, another
signature, a name of the module redefined) is refused by name, the module and its tables left as they were.
"""

import ast
import importlib
import importlib.util
import inspect
import sys
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("exercises_make", ROOT / "exercises" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


class ImplError(Exception):
    """A --impl FILE that cannot stand in: the message names the file and why."""


def exercises(paths):
    """The exercises of `paths` (--impl values: files, or a folder for each exercise file in it)."""
    out = []
    for path in map(Path, paths):
        if path.is_dir():
            out += [make.BY_PATH[p.name] for p in sorted(path.glob("[0-9]*.py")) if p.name in make.BY_PATH]
        elif path.name in make.BY_PATH:
            out.append(make.BY_PATH[path.name])
    return out


def named(path):
    """What the --impl value path stands in for, for train.py's header: its functions' names, or all N."""
    names = [e.name for e in exercises([path])]
    return f"all {len(names)} exercises" if len(names) == len(make.BY_PATH) else ", ".join(names)


def load(path):
    """Load the exercise file at path (or every exercise file of a folder) into its real module; returns
    the module that stands for the file."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob("[0-9]*.py") if p.name in make.BY_PATH)
        if not files:
            raise ImplError(f"--impl {path}: no exercise file in it (python exercises/make.py writes them)")
        folder = types.ModuleType(path.name)  # the folder as a module, for train.py's check of what took effect
        folder.__file__ = str(path)
        for p in files:
            setattr(folder, p.stem, load(p))
        if path.name not in sys.modules:
            sys.modules[path.name] = folder
        return folder
    if not path.is_file():
        raise ImplError(f"--impl {path}: no such file")
    e = make.BY_PATH.get(path.name)
    if e is None:
        raise ImplError(f"--impl {path}: not an exercise file; those are exercises/01_attention.py to "
                        f"{make.EXERCISES[-1].path}, named as exercises/make.py writes them")
    real = importlib.import_module(e.file[:-3])
    text = path.read_text()
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError:
        raise ImplError(f"--impl {path} does not parse:\n{traceback.format_exc(limit=0)}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | \
        {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if e.name not in defined:
        raise ImplError(f"--impl {path}: it defines no function {e.name}, exercise {e.number}'s")
    clash = sorted(name for name in defined - {e.name} if name in vars(real))
    if clash:
        raise ImplError(f"--impl {path} defines {', '.join(clash)}, which {e.file} has already: it may define "
                        f"{e.name} and helpers of other names only")
    before = dict(vars(real))
    original = before.get(_real_name(e), before[e.name])
    try:
        exec(compile(tree, str(path), "exec"), vars(real))  # its globals are the real module's
    except Exception:
        vars(real).clear()
        vars(real).update(before)
        raise ImplError(f"--impl {path} does not run:\n{traceback.format_exc(limit=-1)}") from None
    fn, want = vars(real)[e.name], inspect.signature(original)
    if not callable(fn) or inspect.signature(fn) != want:
        vars(real).clear()
        vars(real).update(before)
        got = inspect.signature(fn) if callable(fn) else "not a function"
        raise ImplError(f"--impl {path}: {e.name}{got}; expected {e.name}{want}, as exercises/make.py writes it")
    vars(real)[_real_name(e)] = original
    _in_tables(real, before[e.name], fn)
    module = types.ModuleType(path.stem)  # the file as a module, for train.py's check of what took effect
    module.__file__, module.exercise = str(path), e
    setattr(module, e.name, fn)
    sys.modules[path.stem] = module
    return module


def _in_tables(module, old, new):
    """Where the module lists its choices as module-level dicts of functions (addrop.ATTRIBUTIONS, MASKS),
    each entry that is old becomes new: the tables then call the student's function, as the module's own
    code does by its name. Done last in load, once the file is known to stand in: a refused file leaves the
    tables as they were."""
    for name, table in list(vars(module).items()):
        if isinstance(table, dict) and not name.startswith("__"):
            for key, value in table.items():
                if value is old:
                    table[key] = new


def _real_name(e):
    """Where the real function is kept, beside the student's, in its module."""
    return f"_real_{e.name.strip('_')}"


def real(module, name):
    """The real function `name` of module (model or addrop), whether or not a student's replaced it."""
    return vars(module).get(f"_real_{name.strip('_')}") or getattr(module, name)


def check_loaded(paths):
    """Exit, naming the file, if an --impl file is not the module in use: --impl takes effect at import, from the
    command line (from_argv), so train.run() called with --impl in its args alone cannot load one."""
    for path in paths:
        module = sys.modules[Path(path).stem]
        if Path(module.__file__).resolve() != Path(path).resolve():
            sys.exit(f"error: --impl {path}: {Path(path).stem} here is {module.__file__}; --impl takes effect on "
                     "train.py's command line (python train.py ... --impl FILE), before anything imports the real one")


def failed(paths, error):
    """What train.py says when a run with --impl ends in an unexpected exception: a student's function that
    hands on a wrong shape, dtype or value fails later, inside the real code. The error's first line and
    where it was raised, the exercises that stand in, and the command that runs their lessons."""
    where = traceback.extract_tb(error.__traceback__)[-1]
    names = ", ".join(f"exercise {e.number} ({e.name})" for e in exercises(paths))
    lessons = [make.command_all(p) if Path(p).is_dir() else
               f"python -m pytest {make.TESTS[make.BY_PATH[Path(p).name].file]} --impl {p}" for p in paths]
    first = (str(error).splitlines() or [""])[0]
    return (f"error: --impl {' '.join(map(str, paths))}: training failed with {type(error).__name__}: {first} "
            f"({Path(where.filename).name}:{where.lineno}, in {where.name}). If it is your {names}, handing on a "
            f"wrong shape, dtype or value that the real code then trips on, its lessons say so:\n    "
            + "\n    ".join(lessons))


def from_argv(argv):
    """Every `--impl FILE` (or --impl=FILE) of a command line, loaded; exits with the message on a bad one."""
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--impl=")]
    paths += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--impl"]
    try:
        return [load(p) for p in paths]
    except ImplError as e:
        sys.exit(f"error: {e}")

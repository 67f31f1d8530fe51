"""
--impl FILE runs the lessons against another implementation of a module, e.g. a student's answers
to the exercises (see exercises/make.py and README.md, section Exercises); --exercise N runs the
lessons of exercise N alone, with the real code for every other exercise:

    python -m pytest test_model.py --impl exercises/model.py --exercise 1
    python -m pytest test_addrop.py --impl exercises/addrop.py --exercise 4
    python -m pytest test_addrop.py --impl exercises/addrop.py           # every lesson, every exercise yours

FILE is imported as the module of its file name (addrop, model) before any test file is (impl.py,
which train.py's --impl shares), so a test's `import addrop` gets FILE, and so does checkpoint.py's
`import model`: from_pretrained builds the student's Model. With --exercise N, every other exercise of FILE is then put back as
the real function, run in FILE's module: the real attribute calls the student's _unmasked_pass
when that is exercise N. So each exercise can be done, and checked, alone and in any order, and a
failure points at the code just written.

What a failure shows, under --impl: a lesson that reaches an exercise not written yet, that
exercise's message; a check that fails (checks.py), its words after the exercise it checks. No
traceback: through the test it would say nothing more.
"""
import cpu; cpu.fair_share()  # noqa: E702  before anything loads torch: OpenMP then shares a busy CPU (cpu.py)

import importlib.util
import sys
import types
from pathlib import Path

import pytest

import checks
import impl

ROOT = Path(__file__).resolve().parent
make = impl.make  # exercises/make.py: the exercises, their files and messages


def pytest_addoption(parser):
    parser.addoption("--impl", action="append", default=[], metavar="FILE",
                     help="import FILE as the module of its name (addrop.py, model.py) for the tests")
    parser.addoption("--exercise", type=int, default=None, metavar="N",
                     help="run only exercise N's lessons, with the real code for every other exercise")


def pytest_configure(config):
    n = config.getoption("exercise")
    if n is not None and n not in make.BY_NUMBER:
        raise pytest.UsageError(f"--exercise {n}: the exercises are numbered 1 to {len(make.EXERCISES)}")
    # model.py first: addrop.py imports model, which must then be the student's
    for path in sorted(map(Path, config.getoption("impl")), key=lambda path: path.name != "model.py"):
        try:
            module = impl.load(path)  # a file written from an older model.py or addrop.py is refused here
        except impl.ImplError as e:
            raise pytest.UsageError(str(e)) from None
        if n is not None:
            _put_back_real(module, path, n)
    files = [Path(p).name for p in config.getoption("impl")]
    if n is not None and files and make.BY_NUMBER[n].file not in files:
        e = make.BY_NUMBER[n]
        raise pytest.UsageError(f"--exercise {n} is {e.name} in {e.file}: {make.command(e)}")
    config.failed_lessons = set()  # lessons failed once under --impl: their other parameters are skipped


def rebound(fn, module, name):
    """fn's code run in `module` (its globals): the real function, calling the student's others. Only a
    plain function can be rebound so: a wrapper's code is the wrapper's, and a closure's cells would be lost."""
    if type(fn) is not types.FunctionType or fn.__closure__ or hasattr(fn, "__wrapped__"):
        raise pytest.UsageError(f"--exercise: the real {name} is not a plain function (a decorator, a closure or "
                                f"another callable), so it cannot be run in the student's module; make it one")
    new = types.FunctionType(fn.__code__, module.__dict__, fn.__name__, fn.__defaults__)
    new.__kwdefaults__, new.__doc__, new.__qualname__ = fn.__kwdefaults__, fn.__doc__, fn.__qualname__
    return new


def _put_back_real(module, path, n):
    """In the student's module, every exercise of its file but exercise n becomes the real function:
    the real code object with the student's module as its globals, so that it calls the student's
    other functions, exercise n among them. impl.load has checked that each is there."""
    spec = importlib.util.spec_from_file_location("real_" + path.stem, ROOT / path.name)
    real = importlib.util.module_from_spec(spec)  # the real file, as a module of another name: only its
    sys.modules[spec.name] = real                 # functions' code is used
    spec.loader.exec_module(real)
    for e in make.EXERCISES:
        if e.file != path.name or e.number == n:
            continue
        *outer, name = e.name.split(".")  # "Layer.forward": set on the student's class Layer
        owner, real_owner = module, real
        for part in outer:
            owner, real_owner = getattr(owner, part), getattr(real_owner, part)
        setattr(owner, name, rebound(getattr(real_owner, name), module, e.name))


def _numbers(item):
    """The exercises a lesson checks, as its marker @pytest.mark.exercise(...) says."""
    return [n for mark in item.iter_markers("exercise") for n in mark.args]


def pytest_collection_modifyitems(config, items):
    """--exercise N: only the lessons of exercise N; none among those given is a usage error naming
    the file that holds them."""
    n = config.getoption("exercise")
    if n is None:
        return
    keep = [item for item in items if n in _numbers(item)]
    if items and not keep:
        e = make.BY_NUMBER[n]
        raise pytest.UsageError(f"--exercise {n}: its lessons are in {make.TESTS[e.file]}, not in "
                                f"{', '.join(sorted({item.path.name for item in items}))}: {make.command(e)}")
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def pytest_report_header(config):
    impls = config.getoption("impl")
    lines = ["implementations: " + ", ".join(f"{Path(p).stem} from {p}" for p in impls)] if impls else []
    n = config.getoption("exercise")
    if n is not None:
        e = make.BY_NUMBER[n]
        lines.append(f"exercise {n}: {e.name} ({e.equation}), with the real code for every other exercise")
    return lines


def _exercise(item):
    """'Exercise N (name)' for the exercise a failure of this lesson points at, or the exercises it
    may point at when each is the student's (no --exercise); None when the lesson checks none."""
    n = item.config.getoption("exercise")
    if n is not None:
        return f"Exercise {n} ({make.BY_NUMBER[n].name})"
    files = [Path(p).name for p in item.config.getoption("impl")]
    found = [e for e in make.EXERCISES if e.file in files and e.number in _numbers(item)]
    if not found:
        return None
    if len(found) == 1:
        return f"Exercise {found[0].number} ({found[0].name})"
    return (f"Exercise {', '.join(str(e.number) for e in found[:-1])} or {found[-1].number} "
            f"({', '.join(e.name for e in found)}: run each alone with --exercise N)")


def _named(message, impls):
    """A blank body's message names exercises/FILE; where the student's copy lives elsewhere, it names
    the path given to --impl instead, so that its command runs as printed."""
    for path in impls:
        message = message.replace(f"exercises/{Path(path).name}", str(path))
    return message


def pytest_runtest_setup(item):
    """Under --impl, one failure per lesson: a slip fails a parametrised lesson's cases alike, and forty
    copies of one message would hide the lessons that tell it apart."""
    name = getattr(item, "originalname", item.name)
    if item.config.getoption("impl") and name in item.config.failed_lessons:
        pytest.skip(f"{name} failed above with other parameters")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    e = call.excinfo
    if e is None or not item.config.getoption("impl"):
        return
    if report.failed:
        item.config.failed_lessons.add(getattr(item, "originalname", item.name))
    if e.errisinstance(NotImplementedError) and str(e.value).startswith("Exercise "):
        e.value.args = (_named(str(e.value), item.config.getoption("impl")),)
        report.longrepr = e.getrepr(style="value")  # the message, without the traceback
    elif e.errisinstance(checks.Wrong):
        who = _exercise(item)
        report.longrepr = f"{who}: {e.value}" if who else str(e.value)

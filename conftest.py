"""
--impl FILE runs the lessons on a student's model.py or addrop.py (exercises/make.py), imported as
the module of its name before any test file is (impl.py, shared with train.py); --exercise N runs
exercise N's lessons alone (their marker, pytest.ini), every other exercise put back as the real
function run in FILE's module, calling the student's exercise N:

    python -m pytest test_addrop.py --impl exercises/addrop.py --exercise 4
    python -m pytest test_addrop.py --impl exercises/addrop.py           # every lesson, every exercise yours

A failure shows, without traceback, a blank body's message or a check's words (checks.py) after the
exercise it points at; a parametrised lesson fails once, its other cases skipped.
"""
import cpu; cpu.fair_share()  # noqa: E702  before anything loads torch: OpenMP then shares a busy CPU (cpu.py)

import importlib.util
import sys
from pathlib import Path

import pytest

import checks
import impl

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
            if n is not None:
                _put_back_real(module, path, n)
        except impl.ImplError as e:
            raise pytest.UsageError(str(e)) from None
    e, files = make.BY_NUMBER.get(n), [Path(p).name for p in config.getoption("impl")]
    if e and files and e.file not in files:
        raise pytest.UsageError(f"--exercise {n} is {e.name} in {e.file}: {make.command(e)}")
    config.failed_lessons = set()  # lessons failed once under --impl: their other parameters are skipped


def _put_back_real(module, path, n):
    """In the student's module, every exercise of its file but exercise n becomes the real function, run
    in the student's module, so that it calls the student's exercise n (impl.load checked each is there)."""
    spec = importlib.util.spec_from_file_location("real_" + path.stem, impl.ROOT / path.name)
    real = importlib.util.module_from_spec(spec)  # the real file, as a module of another name: only its
    sys.modules[spec.name] = real                 # functions' code is used
    spec.loader.exec_module(real)
    for e in (e for e in make.EXERCISES if e.file == path.name and e.number != n):
        *outer, name = e.name.split(".")  # "Layer.forward": set on the student's class Layer
        owner, real_owner = module, real
        for part in outer:
            owner, real_owner = getattr(owner, part), getattr(real_owner, part)
        setattr(owner, name, impl.rebound(getattr(real_owner, name), module, e.name))


def _numbers(item):
    """The exercises a lesson checks, as its marker @pytest.mark.exercise(...) says."""
    return [n for mark in item.iter_markers("exercise") for n in mark.args]


def pytest_collection_modifyitems(config, items):
    """--exercise N: only exercise N's lessons; none among those given: a usage error naming their file."""
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
    impls, e = config.getoption("impl"), make.BY_NUMBER.get(config.getoption("exercise"))
    return ((["implementations: " + ", ".join(f"{Path(p).stem} from {p}" for p in impls)] if impls else []) +
            ([f"exercise {e.number}: {e.name} ({e.equation}), with the real code for every other exercise"] if e else []))


def _exercise(item):
    """'Exercise N (name), lesson 7' for the exercise a failure of this lesson points at, the lesson numbered as the
    tips number it; 'Exercise 2 or 3' when each is the student's (no --exercise); None when it checks none."""
    n, files = item.config.getoption("exercise"), [Path(p).name for p in item.config.getoption("impl")]
    found = [make.BY_NUMBER[n]] if n else [e for e in make.EXERCISES if e.file in files and e.number in _numbers(item)]
    label = found and next((f", lesson {x}" for name, x, _ in make.lessons(item.path.name)
                            if name == item.originalname and len(x) <= 3), "")
    return (f"Exercise {found[0].number} ({found[0].name}){label}" if len(found) == 1 else None if not found else
            f"Exercise {' or '.join(str(e.number) for e in found)}{label} (run each alone with --exercise N)")


def pytest_runtest_setup(item):
    """Under --impl, one failure per lesson: forty cases failed alike would hide the lessons that tell apart."""
    name = getattr(item, "originalname", item.name)
    if item.config.getoption("impl") and name in item.config.failed_lessons:
        pytest.skip(f"{name} failed above with other parameters")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under --impl, a blank body's message (naming the student's copy where it lies, so that its command
    runs) or a check's words after their exercise are the failure, as pytest.fail(words, pytrace=False) shows
    them: no traceback printed, none read (that costs about 0.25 s a failure). One failure per lesson."""
    e, impls = call.excinfo, item.config.getoption("impl")
    blank = e is not None and e.errisinstance(NotImplementedError) and str(e.value).startswith("Exercise ")
    if impls and (blank or e is not None and e.errisinstance(checks.Wrong)):
        words, who = str(e.value), not blank and _exercise(item)
        for path in impls:
            words = words.replace(f"exercises/{Path(path).name}", str(path))
        try:
            raise pytest.fail.Exception(f"{who}: {words}" if who else words, pytrace=False) from None
        except pytest.fail.Exception:
            call.excinfo = pytest.ExceptionInfo.from_current()
    if (yield).get_result().failed and impls:
        item.config.failed_lessons.add(getattr(item, "originalname", item.name))

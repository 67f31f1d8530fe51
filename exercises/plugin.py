"""
pytest's options for the exercises (loaded by the root conftest.py): --impl FILE runs the lessons on a
student's exercise file (exercises/make.py writes them), loaded into its real module before any lesson is
collected (impl.py, shared with train.py); only the lessons of the exercises given run, with the real code
for everything else:

    python -m pytest test_addrop.py --impl exercises/05_threshold.py
    python -m pytest test_model.py test_addrop.py --impl exercises      # every lesson, every exercise yours

A failure shows, without traceback, a blank body's message or a check's words (checks.py) after the
exercise it points at, and the hint command; a parametrised lesson fails once, its other cases skipped.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lessons import checks as pytest imports them
import checks  # noqa: E402
import impl  # noqa: E402

make = impl.make  # exercises/make.py: the exercises, their files and messages


def pytest_addoption(parser):
    parser.addoption("--impl", action="append", default=[], metavar="FILE",
                     help="run the lessons on a student's exercise file, exercises/NN_name.py (or the folder "
                          "exercises: every one), with the real code for everything else")


def pytest_configure(config):
    for path in config.getoption("impl"):
        try:
            impl.load(path)
        except impl.ImplError as e:
            raise pytest.UsageError(str(e)) from None
    config.exercises = {e.number: e for e in impl.exercises(config.getoption("impl"))}
    config.failed_lessons = set()  # lessons failed once under --impl: their other parameters are skipped


def _numbers(item):
    """The exercises a lesson checks, as its marker @pytest.mark.exercise(...) says."""
    return [n for mark in item.iter_markers("exercise") for n in mark.args]


def pytest_collection_modifyitems(config, items):
    """Under --impl: only the lessons of the exercises given; none among those collected: a usage error
    naming the lessons' file and the command."""
    if not config.getoption("impl"):
        return
    keep = [item for item in items if set(_numbers(item)) & set(config.exercises)]
    if items and not keep:
        e = next(iter(config.exercises.values()))
        raise pytest.UsageError(f"exercise {e.number}'s lessons are in {make.TESTS[e.file]}, not in "
                                f"{', '.join(sorted({item.path.name for item in items}))}: {make.command(e)}")
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def pytest_report_header(config):
    impls = config.getoption("impl")
    return [f"exercises {', '.join(map(str, config.exercises))} from {', '.join(impls)}, the real code for "
            "everything else"] if impls else []


def _exercise(item):
    """('Exercise N (name), lesson 7', N) for the exercise a failure of this lesson points at, the lesson
    numbered as its docstring numbers it; 'Exercise 2 or 3' when both are the student's."""
    found = [e for n, e in item.config.exercises.items() if n in _numbers(item)]
    if not found:
        return None, None
    label = next((f", lesson {x}" for name, x, _ in make.lessons(make.TESTS[found[0].file])
                  if name == item.originalname and len(x) <= 3), "")
    if len(found) == 1:
        return f"Exercise {found[0].number} ({found[0].name}){label}", found[0].number
    return (f"Exercise {' or '.join(str(e.number) for e in found)}{label} (check each alone: "
            f"{make.command(found[0])})", found[0].number)


def pytest_runtest_setup(item):
    """Under --impl, one failure per lesson: forty cases failed alike would hide the lessons that tell apart."""
    name = getattr(item, "originalname", item.name)
    if item.config.getoption("impl") and name in item.config.failed_lessons:
        pytest.skip(f"{name} failed above with other parameters")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under --impl, a blank body's message (naming the student's file where it lies, so that its command
    runs), a check's words, or an error's (_crash), after their exercise and the hint command, are the
    failure, as pytest.fail(words, pytrace=False) shows them: no traceback printed, none read. One failure
    per lesson."""
    e, impls = call.excinfo, item.config.getoption("impl")
    blank = e is not None and e.errisinstance(NotImplementedError) and str(e.value).startswith("Exercise ")
    if impls and e is not None and e.errisinstance(Exception):
        who, n = (None, None) if blank else _exercise(item)
        words = str(e.value) if blank or e.errisinstance(checks.Wrong) else _crash(e, impls)
        for path in impls:
            if Path(path).name in make.BY_PATH:
                words = words.replace(make.BY_PATH[Path(path).name].path, str(path))
        hint = f"\n  stuck? python exercises/hint.py {n} (one hint a call)" if n else ""
        try:
            raise pytest.fail.Exception(f"{who}: {words}{hint}" if who else words, pytrace=False) from None
        except pytest.fail.Exception:
            call.excinfo = pytest.ExceptionInfo.from_current()
    if (yield).get_result().failed and impls:
        item.config.failed_lessons.add(getattr(item, "originalname", item.name))


def _crash(e, impls):
    """A lesson stopped by an error under --impl: the error, and the lines of the student's files it came
    through. The real code's lines and the lesson's are left out: a traceback through them would print
    answers (the real bodies) to a student still writing them."""
    roots = [Path(p).resolve() for p in impls]

    def mine(path):
        return any(path == r or r in path.parents for r in roots)
    first = str(e.value).strip().splitlines()[0] if str(e.value).strip() else ""
    lines = [f"\n    {entry.path}:{entry.lineno + 1}, in {entry.name}: {str(entry.statement).strip()}"
             for entry in e.traceback if mine(Path(entry.path).resolve())]
    last = e.traceback[-1]
    inside = "" if mine(Path(last.path).resolve()) else \
        f"\n    (raised inside {Path(last.path).name}'s {last.name}, on what your code gave it)"
    return (f"the lesson stopped on {e.typename}: {first}" + ("; your code's lines on the way:" if lines else "")
            + "".join(lines) + inside)

"""
--impl FILE runs the tests against another implementation of a module, e.g. a student's
answers to the exercises (see exercises/make.py and README.md, section Exercises):

    python -m pytest test_addrop.py --impl exercises/addrop.py
    python -m pytest test_model.py --impl exercises/model.py

FILE is imported as the module of its file name (addrop, model) before any test file is, so a
test's `import addrop` gets FILE, and so does checkpoint.py's `import model`: from_pretrained
builds the student's Model. A test that reaches an exercise not written yet fails with
that exercise's message alone: the traceback through the test would say nothing more.
"""

import importlib.util
import sys
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_addoption(parser):
    parser.addoption("--impl", action="append", default=[], metavar="FILE",
                     help="import FILE as the module of its name (addrop.py, model.py) for the tests")


def pytest_configure(config):
    for path in map(Path, config.getoption("impl")):
        if not path.is_file():
            raise pytest.UsageError(f"--impl {path}: no such file")
        if not (ROOT / path.name).is_file():  # else the tests would import the real module, and pass
            raise pytest.UsageError(f"--impl {path}: the tests import addrop and model; "
                                    "the file must be named addrop.py or model.py")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        try:
            spec.loader.exec_module(module)
        except Exception:  # a syntax error, say: its line, not pytest's internals
            raise pytest.UsageError(f"--impl {path} does not import:\n{traceback.format_exc(limit=-1)}") from None


def pytest_report_header(config):
    impls = config.getoption("impl")
    if impls:
        return "implementations: " + ", ".join(f"{Path(p).stem} from {p}" for p in impls)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    e = call.excinfo
    if e is not None and e.errisinstance(NotImplementedError) and str(e.value).startswith("Exercise "):
        report.longrepr = e.getrepr(style="value")  # the message, without the traceback

"""
The exercises are honest: exercises/model.py and exercises/addrop.py are the real files with
the exercise bodies blanked and nothing else changed, the lessons pass on the real files through
the same --impl mechanism a student uses, and every blanked body fails a lesson with its own
message (so no exercise can be skipped by a lesson that never reaches it).

    python -m pytest -q test_exercises.py     # ~30 s on a CPU: it runs the lessons in subprocesses
"""

import ast
import importlib.util
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("exercises_make", ROOT / "exercises" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
FILES = list(make.TESTS)  # model.py, addrop.py


def lessons(*args):
    """Run pytest on the lessons in a fresh interpreter (so that --impl imports before any test
    does), without third-party plugins (the lessons use none; they cost a second to load).
    Returns its exit code and its output."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *map(str, args)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The lesson runs of (c) and (d), started together as many at a time as there are cores:
    each spends most of its few seconds importing torch. Keys: "real", and exercise numbers."""
    jobs = {"real": ["test_model.py", "test_addrop.py", "--impl", "model.py", "--impl", "addrop.py"]}
    for n, file, _, _, _, k, _ in make.EXERCISES:  # the real file with only exercise n blanked
        path = tmp_path_factory.mktemp(f"exercise{n}") / file
        path.write_text(make.generate(numbers={n})[file])
        jobs[n] = ["-x", "-q", make.TESTS[file], "-k", k, "--impl", path]
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        yield {key: pool.submit(lessons, *args) for key, args in jobs.items()}


def signatures(source):
    """{'name' or 'Class.name': its signature (or bases) and decorators} for the top-level
    functions and classes and the classes' methods."""
    def sig(node, head):
        return head, [ast.unparse(d) for d in node.decorator_list]
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = sig(node, ast.unparse(node.args))
        elif isinstance(node, ast.ClassDef):
            out[node.name] = sig(node, [ast.unparse(b) for b in node.bases])
            for n in node.body:
                if isinstance(n, ast.FunctionDef):
                    out[f"{node.name}.{n.name}"] = sig(n, ast.unparse(n.args))
    return out


@pytest.mark.parametrize("file", FILES)
def test_same_functions_and_signatures(file):
    """(a) The blank file defines the same functions, classes and methods as the real one, with
    the same signatures: a student's answer drops into the real code's place."""
    real = signatures((ROOT / file).read_text())
    assert signatures((ROOT / "exercises" / file).read_text()) == real
    blanked = [e[2] for e in make.EXERCISES if e[1] == file]
    assert blanked and all(name in real for name in blanked)


@pytest.mark.parametrize("file", FILES)
def test_committed_files_are_generated(file):
    """(b) The committed exercise file is what exercises/make.py makes of the real file as it is
    now: a change to model.py or addrop.py reaches the exercises."""
    assert (ROOT / "exercises" / file).read_text() == make.generate()[file], \
        f"exercises/{file} is out of date: run python exercises/make.py"


def test_real_files_pass_every_lesson(runs):
    """(c) The real model.py and addrop.py, passed through --impl as a student's files are, pass
    every lesson of test_model.py and test_addrop.py; the header shows that --impl took effect."""
    code, out = runs["real"].result()
    assert code == 0, out
    assert "implementations: model from model.py, addrop from addrop.py" in out


@pytest.mark.parametrize("exercise", make.EXERCISES, ids=lambda e: f"{e[0]}-{e[2]}")
def test_each_blank_fails_its_lessons(exercise, runs):
    """(d) The real file with only this exercise blanked fails its lessons (the first failure
    stops the run), with this exercise's own message, printed without a traceback by conftest.py."""
    n, file, name, equation, lesson_names, k, _ = exercise
    code, out = runs[n].result()
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    assert make.message(n, file, name, equation, lesson_names, k) in out, out
    assert "Traceback" not in out

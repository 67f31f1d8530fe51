"""
The exercises are honest: exercises/model.py and exercises/addrop.py are the real files with the
exercise bodies blanked and nothing else changed; each exercise is checked alone, by the command
its blank body prints, with the real code for every other exercise; that command tells a wrong
answer from a right one, in words; and the lessons each exercise names are those its markers say.

    python -m pytest -q test_exercises.py     # ~20 s on 2 idle cores: it runs the lessons 45 times over

The wrong answers below are held back from the student: common mistakes, each written into the
real body of its exercise as a small change to the text.
"""

import ast
import contextlib
import io
import multiprocessing
import os
import re
import sys
import types
from pathlib import Path

import pytest

import torch

import checks
import impl

ROOT = Path(__file__).resolve().parent
make = impl.make  # exercises/make.py
FILES = list(make.TESTS)  # model.py, addrop.py

# (exercise, the mistake, text of the real body, what the student wrote instead)
WRONG = [
    (1, "scale ignored", "A = A * scale", "A = A"),
    (1, "no 1/sqrt(D)", "s = 1 / math.sqrt(D)", "s = 1"),
    (1, "the dropped A handed out without its 1/(1-p)", "A = dropout(A, self.p_attn, self.training)",
     "A = dropout(A, self.p_attn, self.training, rescale=False)"),
    (1, "attention dropout without its 1/(1-p)", "y = y / (1 - self.p_attn)", "y = y"),
    (1, "first_only ignored: every row drawn", "if first_only:", "if False:"),
    (2, "the labels given ignored", "if labels is None:", "if True:"),
    (2, "dropped_A not passed on", ', dropped_A=dropped_A)', ')'),
    (3, "a mean for the sum", "labels[:, None]).sum()", "labels[:, None]).mean()"),
    (3, "regression without the 1/2", "-0.5 * ((", "-(("),
    (4, "the model not handed back in its mode", "model.train(was_training)", "pass"),
    (4, "AA runs every layer", "depth=max(layers) + 1", "depth=None"),
    (5, "a float for the integer index", "idx = n * round((1 - p) * 10**6) // 10**6",
     "idx = (n.double() * (1 - p)).long()"),
    (5, "above the threshold, not at or above", "drop = scores >= thr", "drop = scores > thr"),
    (5, "q as the probability to keep", "bernoulli((B, H, T, T), q,", "bernoulli((B, H, T, T), 1 - q,"),
    (6, "no guard", "drop.view(torch.uint8).mul_(1 - lost)", "drop"),
    (6, "padding queries masked", "real[:, None, :, None] & real[:, None, None, :]", "real[:, None, None, :]"),
    (7, "the parity flipped", "epoch % 2 == 0", "epoch % 2 == 1"),
    (8, "A_l not multiplied in", "scores[l] = attns[l] * total / m", "scores[l] = total / m"),
    (8, "a left Riemann sum", "torch.arange(1, m + 1,", "torch.arange(0, m,"),
    (9, "p alone for p q", "(B, H, T, T), p * q,", "(B, H, T, T), p,"),
    (10, "a mean for the sum", 'reduction="sum"', 'reduction="mean"'),
]


def written(n, source=None):
    """The text of the exercise file as a student has it with only exercise n written: from the real
    file's text (or from `source`, the real text with a mistake in exercise n's body)."""
    e = make.BY_NUMBER[n]
    text = source if source is not None else (ROOT / e.file).read_text()
    return make.blank(e.file, text, numbers=[m.number for m in make.EXERCISES if m.number != n])


def mistaken(n, old, new):
    """The real text of exercise n's file with `old` replaced by `new` inside exercise n's body."""
    e = make.BY_NUMBER[n]
    text = (ROOT / e.file).read_text()
    lines = text.splitlines(keepends=True)
    start, end, _ = make.body_lines(make.find(ast.parse(text), e.name), lines)
    body = "".join(lines[start:end])
    assert body.count(old) == 1, f"the wrong answer {old!r} -> {new!r}: {old!r} is not once in the body of {e.name}; update WRONG"
    return "".join(lines[:start]) + body.replace(old, new) + "".join(lines[end:])


def pytest_run(args):
    """One lesson command, pytest.main(args), in a worker process of lessons(): its exit code, its output,
    the worker's pid and the modules model and addrop if some earlier run had left them imported."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the lessons use no plugin
    os.chdir(ROOT)
    torch.set_num_threads(1)  # as many runs at a time as cores: one thread each, none waiting on another's
    left = [m for m in ("model", "addrop") if m in sys.modules]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(["-p", "no:cacheprovider", *map(str, args)]))
    return code, out.getvalue(), os.getpid(), left


def lessons(jobs):
    """{key: pytest_run(args)} for {key: args}. Each run needs an interpreter of its own, in which --impl
    imports before any test does: a pool whose workers are forked from a server that has imported torch
    and pytest (most of a short run's time), one task per worker (maxtasksperchild) and one per hand-out
    (chunksize; by default the pool hands out tasks in chunks, which one worker runs in one interpreter)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "pytest"])
    with context.Pool(maxtasksperchild=1) as pool:
        return dict(zip(jobs, pool.map(pytest_run, jobs.values(), chunksize=1)))


def run_of(e, path, *extra):
    """The arguments of exercise e's command (make.command) on the file at path."""
    return [make.TESTS[e.file], "--impl", path, "--exercise", e.number, *extra]


def where(tmp_path_factory, key, name):
    """The path of run `key`'s exercise file `name`: a folder of its own, outside exercises/."""
    return tmp_path_factory.getbasetemp() / re.sub(r"\W+", "_", "-".join(map(str, key)))[:40] / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every lesson run of the tests below, run together. Keys: ("real", test file), ("written", n),
    ("wrong", n, mistake), ("blank", n), "pairing"; values: pytest_run's, or for a wrong answer that
    cannot be written (its text is not in the body any more) the reason, which fails its own test alone."""
    def file(key, name, text):
        path = where(tmp_path_factory, key, name)
        path.parent.mkdir()
        path.write_text(text)
        return path
    impls = ["--impl", "model.py", "--impl", "addrop.py"]
    jobs = {("real", test): [test, *impls] for test in ("test_model.py", "test_addrop.py")}  # the longest first
    failed = {}
    for n, mistake, old, new in WRONG:
        e = make.BY_NUMBER[n]
        try:
            path = file(("wrong", n, mistake), e.file, written(n, mistaken(n, old, new)))
        except AssertionError as reason:
            failed["wrong", n, mistake] = str(reason)
            continue
        jobs["wrong", n, mistake] = run_of(e, path, "-x", "-q")
    blank = make.generate()
    for e in make.EXERCISES:
        jobs["written", e.number] = run_of(e, file(("written", e.number), e.file, written(e.number)), "-q")
        jobs["blank", e.number] = run_of(e, file(("blank", e.number), e.file, blank[e.file]), "-x", "-q")
    jobs["pairing"] = ["test_model.py", "--impl", file(("pairing",), "addrop.py", blank["addrop.py"]), "--exercise", 7]
    return {**lessons(jobs), **failed}


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
    assert signatures(make.generate()[file]) == real
    blanked = [e.name for e in make.EXERCISES if e.file == file]
    assert blanked and all(name in real for name in blanked)


@pytest.mark.parametrize("file", FILES)
def test_committed_files_are_generated(file):
    """(b) The committed exercise file is, outside the exercise bodies, what exercises/make.py makes of
    the real file as it is now: a change to model.py or addrop.py reaches the exercises. The bodies are
    the student's: answers written there keep this test green."""
    text = (ROOT / "exercises" / file).read_text()
    try:
        diff = make.stale(file, text, f"exercises/{file}")
    except SyntaxError as e:
        pytest.skip(f"exercises/{file} does not parse (line {e.lineno}): an answer being written")
    assert not diff, f"exercises/{file} is out of date: run python exercises/make.py\n{diff}"


@pytest.mark.parametrize("file", FILES)
def test_answers_are_not_differences(file):
    """(b) holds with every exercise answered (the real bodies written into the blank file), and fails
    when a line outside the bodies, here a docstring, is not what make.py writes."""
    answered = make.blank(file, (ROOT / file).read_text(), numbers=[])
    assert make.answered(file, answered) == [e.number for e in make.EXERCISES if e.file == file]
    assert make.stale(file, answered, file) == ""
    assert make.stale(file, answered.replace('"""', '""" Edited.', 1), file) != ""


@pytest.mark.parametrize("file", FILES)
def test_rewrite_keeps_the_answers(file):
    """python exercises/make.py after a core change: the student's answer (here the first exercise of
    the file, written with a mistake of WRONG so that it is not the real body) is kept line for line, the
    other exercises take the new blanks, and every line outside the bodies (here the module docstring, as
    the core change edited it) is what make.py writes now."""
    real = (ROOT / file).read_text()
    numbers = [e.number for e in make.EXERCISES if e.file == file]
    _, _, old, new = next(w for w in WRONG if w[0] == numbers[0])
    student = make.blank(file, real, numbers=numbers[1:]).replace(old, new)
    fresh = make.blank(file, real.replace('"""', '""" Edited.', 1))
    text, kept = make.keep_answers(file, fresh, student)
    assert kept == [numbers[0]] and make.answered(file, text) == [numbers[0]]
    assert make.outside_bodies(file, text) == make.outside_bodies(file, fresh)
    assert new in text and old not in text and '""" Edited.' in text
    assert make.keep_answers(file, fresh, fresh) == (fresh, [])  # nothing answered: the new blank file as it is


def test_real_files_pass_every_lesson(runs):
    """(c) The real model.py and addrop.py, passed through --impl as a student's files are, pass
    every lesson of test_model.py and test_addrop.py; the header shows that --impl took effect."""
    for test in ("test_model.py", "test_addrop.py"):
        code, out, _, _ = runs["real", test]
        assert code == 0, out
        assert "implementations: model from model.py, addrop from addrop.py" in out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_blank_fails_its_lessons(e, runs, tmp_path_factory):
    """(d) The blank file fails the command that exercise e's message prints (the first failure stops
    the run) with exercise e's own message, printed without a traceback by conftest.py: every other
    exercise, blank too, is replaced by the real code, so none can stand in the way. The file lies
    outside exercises/, and the message names it where it lies."""
    code, out, _, _ = runs["blank", e.number]
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    path = str(where(tmp_path_factory, ("blank", e.number), e.file))
    assert make.message(e).replace(f"exercises/{e.file}", path) in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_exercise_written_alone_passes(e, runs):
    """(e) The blank file with only exercise e written (its real body put back, every other exercise
    still blank) passes the command that e's message prints: each exercise can be done first."""
    code, out, _, _ = runs["written", e.number]
    assert code == 0, out
    assert re.search(r"\b\d+ passed", out), out


@pytest.mark.parametrize("n, mistake, old, new", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answers_fail_in_words(n, mistake, old, new, runs):
    """(f) Each held-back wrong answer, written alone into the blank file, fails its exercise's command;
    the failure names the exercise and says what was measured, with no tensor printed whole and no
    traceback."""
    if isinstance(runs["wrong", n, mistake], str):  # its text is not in the body any more: this case alone fails
        pytest.fail(runs["wrong", n, mistake])
    code, out, _, _ = runs["wrong", n, mistake]
    e = make.BY_NUMBER[n]
    assert code == 1, out
    assert f"Exercise {n} ({e.name}): " in out, out
    assert "tensor(" not in out and "Traceback" not in out, out


def test_each_run_has_an_interpreter_of_its_own(runs):
    """No lesson run shares a process with another (each pid once), and none starts with model or addrop
    imported: a blank exercise run where an earlier run had imported the real addrop.py would pass. The pool's
    default chunksize hands several runs to one worker, which is exactly that; chunksize=1 and
    maxtasksperchild=1 prevent it."""
    done = [r for r in runs.values() if not isinstance(r, str)]
    assert len({pid for _, _, pid, _ in done}) == len(done)
    assert all(left == [] for _, _, _, left in done)


def test_wrong_lesson_file_names_the_right_one(runs):
    """--exercise 7 given test_model.py, whose lessons check exercise 1 only, is a usage error (exit 4) that
    names test_addrop.py and gives exercise 7's command, instead of deselecting everything (exit 5)."""
    code, out, _, _ = runs["pairing"]
    assert code == 4 and "its lessons are in test_addrop.py" in out and "--exercise 7" in out, out


@pytest.mark.parametrize("test", make.TESTS.values())
def test_markers_tie_every_exercise_to_lessons(test):
    """Every exercise has lessons, in its own file's tests; every marker names an exercise that exists and
    whose file that test file checks; and make.py reads the markers as pytest does (its messages and
    tables come from them)."""
    module = sys.modules.get(test[:-3]) or __import__(test[:-3])
    for lesson in make.lessons(test):
        pytest_reads = [n for m in getattr(getattr(module, lesson.name), "pytestmark", []) if m.name == "exercise"
                        for n in m.args]
        assert list(lesson.exercises) == pytest_reads, lesson.name
        assert all(n in make.BY_NUMBER and make.TESTS[make.BY_NUMBER[n].file] == test for n in lesson.exercises), \
            f"{lesson.name} is marked exercise{lesson.exercises}: no such exercise of {test}"
    for e in make.EXERCISES:
        if make.TESTS[e.file] == test:
            assert any(e.number in lesson.exercises for lesson in make.lessons(test)), f"exercise {e.number}: no lesson"


def test_tables_and_tips_agree_with_the_markers():
    """RESULTS.md's exercise table is what make.py writes from the markers; README.md's table names each
    exercise's number, function and command; a tip's "lesson N" is one of its exercise's lessons."""
    results = (ROOT / "RESULTS.md").read_text()
    assert make.with_table(results) == results, "RESULTS.md's exercise table is out of date: run python exercises/make.py"
    rows = re.findall(r"^(\d+) \| `([\w.]+)` \|.*\| (?:`(.*)`|… (\d+))$", (ROOT / "README.md").read_text(), re.M)
    assert [(int(n), name) for n, name, _, _ in rows] == [(e.number, e.name) for e in make.EXERCISES]
    assert all(cmd in ("", make.command(make.BY_NUMBER[int(n)])) and short in ("", n) for n, _, cmd, short in rows)
    for e in make.EXERCISES:
        labels = [lesson.label for lesson in make.lessons(make.TESTS[e.file]) if e.number in lesson.exercises]
        assert set(re.findall(r"[Ll]esson (\w+)", e.tip or "")) <= set(labels), f"exercise {e.number}'s tip"


@pytest.mark.parametrize("old, new, says", [
    ("from model import bernoulli", "", "-from model import bernoulli"),  # a line deleted
    ("def is_addrop_epoch(", "def is_addrop_epoch_(", "no is_addrop_epoch, one of the exercises"),
    (None, "", "is empty"),
])
def test_stale_file_is_refused_at_load(old, new, says, tmp_path):
    """A student's file that differs from what make.py writes outside the exercise bodies is refused by
    impl.load (--impl, for the lessons and train.py alike) before it is imported: the message names the
    file, the lines that differ (or what it lacks) and python exercises/make.py, which keeps the answers."""
    path = tmp_path / "addrop.py"
    path.write_text(written(6).replace(old, new, 1) if old else new)
    with pytest.raises(impl.ImplError) as refused:
        impl.load(path)
    assert f"--impl {path}" in str(refused.value) and says in str(refused.value)
    assert "python exercises/make.py" in str(refused.value) and sys.modules["addrop"].__file__ != str(path)


def test_rebinding_refuses_what_it_cannot_rebind():
    """--exercise N runs the real code of the other exercises in the student's module: a plain function
    reads the student's module as its globals; a wrapper (its code would be the wrapper's, the function
    it wraps skipped) or a closure (its cells would be lost) is refused, naming the function."""
    import conftest
    student = types.ModuleType("student")
    student.helper = lambda: "the student's"
    plain = types.FunctionType(compile("def f():\n    return helper()", "f", "exec").co_consts[0], {})
    assert conftest.rebound(plain, student, "f")() == "the student's"
    wrapper = types.FunctionType(plain.__code__, {})
    wrapper.__wrapped__ = plain  # as functools.wraps leaves a decorator's wrapper
    for fn in (wrapper, (lambda x: lambda: x)(1), staticmethod(plain)):
        with pytest.raises(pytest.UsageError, match="the real Layer.forward is not a plain function"):
            conftest.rebound(fn, student, "Layer.forward")


@pytest.mark.parametrize("actual, expected, says", [
    ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0], "a flipped sign?"),
    ([0.25, 0.5, 0.75], [1.0, 2.0, 3.0], "actual = expected / 4: a mean for a sum?"),
    ([3.0, 6.0, 9.0], [1.0, 2.0, 3.0], "actual = 3 x expected: a sum for a mean?"),
    ([4.0, 7.0, 2.0], [4.0, 6.0, 2.0], "integers off by one"),
    ([[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]], "a transpose?"),
    ([1.0, 0.0, 0.5], [0.0, 1.0, 1.0], None),  # no usual slip: none named
])
def test_checks_name_the_usual_slips(actual, expected, says):
    """A failed check names the slip its numbers show (checks._slip: a factor -1, 1/N or N to 1e-3,
    integers off by exactly one, the sizes in another order), and names none where they show none."""
    with pytest.raises(checks.Wrong) as failed:
        checks.close(torch.tensor(actual), torch.tensor(expected), "x", atol=1e-9)
    message = str(failed.value)
    assert (says in message) if says else not any(w in message for w in ("?", "slip")), message

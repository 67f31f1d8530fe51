"""
The exercises are honest: exercises/model.py and exercises/addrop.py are the real files with the
exercise bodies blanked and nothing else changed; each exercise is checked alone, by the command
its blank body prints, with the real code for every other exercise; and that command tells a
wrong answer from a right one, in words.

    python -m pytest -q test_exercises.py     # ~2 min on 2 cores: it runs the lessons 42 times over

The wrong answers below are held back from the student: common mistakes, each written into the
real body of its exercise as a small change to the text.
"""

import ast
import difflib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("exercises_make", ROOT / "exercises" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
FILES = list(make.TESTS)  # model.py, addrop.py

# (exercise, the mistake, text of the real body, what the student wrote instead)
WRONG = [
    (1, "scale ignored", "A = A * scale", "A = A"),
    (1, "no 1/sqrt(D)", "s = 1 / math.sqrt(D)", "s = 1"),
    (1, "the dropped A handed out without its 1/(1-p)", "A = dropout(A, self.p_attn, self.training)",
     "A = dropout(A, self.p_attn, self.training, rescale=False)"),
    (1, "attention dropout without its 1/(1-p)", "y = y / (1 - self.p_attn)", "y = y"),
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
    assert body.count(old) == 1, f"exercise {n}: {old!r} is not once in the body of {e.name}: update WRONG"
    return "".join(lines[:start]) + body.replace(old, new) + "".join(lines[end:])


def lessons(jobs):
    """Run pytest on the lessons once per job, a list of arguments; returns {key: (exit code, output)}.
    Each run needs an interpreter of its own, in which --impl imports before any test does. They are
    forked (POSIX) from one that has imported torch (serve, below), most of a short run's time."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "jobs.json"
        path.write_text(json.dumps([[str(a) for a in args] for args in jobs.values()]))
        r = subprocess.run([sys.executable, __file__, str(path)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})  # the lessons use no plugin
        assert r.returncode == 0, r.stderr
        results = json.loads((Path(d) / "results.json").read_text())
    return {key: tuple(result) for key, result in zip(jobs, results)}


def serve(jobs_path):
    """The runs of lessons(): each job's pytest in a child forked from this process, which has imported
    torch and pytest already, as many at a time as there are cores. Writes [exit code, output] per job
    to results.json beside jobs_path."""
    import torch  # for the children: imported once, before the forks
    torch.empty(1, device="meta").normal_()  # so is what the first op on the meta device imports (checkpoint.py)
    jobs = json.loads(Path(jobs_path).read_text())
    outputs = [Path(jobs_path).with_name(f"{i}.out") for i in range(len(jobs))]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    running, codes = {}, {}  # pid -> job, job -> exit code

    def wait():
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)

    for i, args in enumerate(jobs):
        if len(running) == cores:
            wait()
        pid = os.fork()
        if pid == 0:  # the child: its output into its file, then pytest as from the command line
            fd = os.open(outputs[i], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1), os.dup2(fd, 2)
            try:
                code = int(pytest.main(["-p", "no:cacheprovider", *args]))
            except BaseException:
                traceback.print_exc()
                code = 3
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
        running[pid] = i
    while running:
        wait()
    results = [[codes[i], outputs[i].read_text()] for i in range(len(jobs))]
    Path(jobs_path).with_name("results.json").write_text(json.dumps(results))


def run_of(e, path, *extra):
    """The arguments of exercise e's command (make.command) on the file at path."""
    return [make.TESTS[e.file], "--impl", path, "--exercise", e.number, *extra]


def where(tmp_path_factory, key, name):
    """The path of run `key`'s exercise file `name`: a folder of its own, outside exercises/."""
    return tmp_path_factory.getbasetemp() / re.sub(r"\W+", "_", "-".join(map(str, key)))[:40] / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every lesson run of the tests below, run together. Keys: ("real", test file), ("written", n),
    ("wrong", n, mistake), ("blank", n); values: exit code and output."""
    def file(key, name, text):
        path = where(tmp_path_factory, key, name)
        path.parent.mkdir()
        path.write_text(text)
        return path
    impls = ["--impl", "model.py", "--impl", "addrop.py"]
    jobs = {("real", test): [test, *impls] for test in ("test_model.py", "test_addrop.py")}  # the longest first
    for e in make.EXERCISES:
        jobs["written", e.number] = run_of(e, file(("written", e.number), e.file, written(e.number)), "-q")
    for n, mistake, old, new in WRONG:
        e = make.BY_NUMBER[n]
        path = file(("wrong", n, mistake), e.file, written(n, mistaken(n, old, new)))
        jobs["wrong", n, mistake] = run_of(e, path, "-x", "-q")
    blank = make.generate()
    for e in make.EXERCISES:
        jobs["blank", e.number] = run_of(e, file(("blank", e.number), e.file, blank[e.file]), "-x", "-q")
    return lessons(jobs)


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


def differences(file, text):
    """Where the exercise file `text` differs from what exercises/make.py writes, outside the
    exercise bodies (the student's answers): a few lines of diff, or '' where it does not."""
    ours, theirs = (make.outside_bodies(file, t) for t in (make.generate()[file], text))
    diff = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "make.py writes", f"exercises/{file}",
                                n=1, lineterm="")
    return "\n".join(list(diff)[:12])


@pytest.mark.parametrize("file", FILES)
def test_committed_files_are_generated(file):
    """(b) The committed exercise file is, outside the exercise bodies, what exercises/make.py makes of
    the real file as it is now: a change to model.py or addrop.py reaches the exercises. The bodies are
    the student's: answers written there keep this test green."""
    text = (ROOT / "exercises" / file).read_text()
    try:
        diff = differences(file, text)
    except SyntaxError as e:
        pytest.skip(f"exercises/{file} does not parse (line {e.lineno}): an answer being written")
    assert not diff, f"exercises/{file} is out of date: run python exercises/make.py\n{diff}"


@pytest.mark.parametrize("file", FILES)
def test_answers_are_not_differences(file):
    """(b) holds with every exercise answered (the real bodies written into the blank file), and fails
    when a line outside the bodies, here a docstring, is not what make.py writes."""
    answered = make.blank(file, (ROOT / file).read_text(), numbers=[])
    assert make.answered(file, answered) == [e.number for e in make.EXERCISES if e.file == file]
    assert differences(file, answered) == ""
    assert differences(file, answered.replace('"""', '""" Edited.', 1)) != ""


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
        code, out = runs["real", test]
        assert code == 0, out
        assert "implementations: model from model.py, addrop from addrop.py" in out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_blank_fails_its_lessons(e, runs, tmp_path_factory):
    """(d) The blank file fails the command that exercise e's message prints (the first failure stops
    the run) with exercise e's own message, printed without a traceback by conftest.py: every other
    exercise, blank too, is replaced by the real code, so none can stand in the way. The file lies
    outside exercises/, and the message names it where it lies."""
    code, out = runs["blank", e.number]
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    path = str(where(tmp_path_factory, ("blank", e.number), e.file))
    assert make.message(e).replace(f"exercises/{e.file}", path) in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_exercise_written_alone_passes(e, runs):
    """(e) The blank file with only exercise e written (its real body put back, every other exercise
    still blank) passes the command that e's message prints: each exercise can be done first."""
    code, out = runs["written", e.number]
    assert code == 0, out
    assert re.search(r"\b\d+ passed", out), out


@pytest.mark.parametrize("n, mistake, old, new", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answers_fail_in_words(n, mistake, old, new, runs):
    """(f) Each held-back wrong answer, written alone into the blank file, fails its exercise's command;
    the failure names the exercise and says what was measured, with no tensor printed whole and no
    traceback."""
    code, out = runs["wrong", n, mistake]
    e = make.BY_NUMBER[n]
    assert code == 1, out
    assert f"Exercise {n} ({e.name}): " in out, out
    assert "tensor(" not in out and "Traceback" not in out, out


if __name__ == "__main__":  # lessons() runs this file as the server of its runs
    serve(sys.argv[1])

"""
The exercises are honest: exercises/model.py and exercises/addrop.py are the real files with the exercise bodies
blanked and nothing else changed; each exercise is checked alone, by the command its blank body prints, with the
real code for every other exercise; that command tells a wrong answer from a right one, in words; and the lessons
each exercise names are those its markers say. The wrong answers below, held back from the student, are common
mistakes, each a small change to the text of its exercise's real body.
"""

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

# (exercise, the mistake, text of the real body, what the student wrote instead)
WRONG = [
    (1, "scale ignored", "A = A * scale", "A = A"),
    (1, "no 1/sqrt(D)", "s = 1 / math.sqrt(D)", "s = 1"),
    (1, "the dropped A handed out without its 1/(1-p)", "A = dropout(A, self.p_attn, self.training)",
     "A = dropout(A, self.p_attn, self.training, rescale=False)"),
    (1, "attention dropout without its 1/(1-p)", "y = y / (1 - self.p_attn)", "y = y"),
    (1, "first_only ignored: every row drawn", "if first_only:", "if False:"),
    (2, "the labels given ignored", "if labels is None:", "if True:"),
    (2, "dropped_A not passed on", ', dropped_A=dropped_A,', ','),
    (3, "a mean for the sum", "labels[:, None]).sum()", "labels[:, None]).mean()"),
    (3, "regression without the 1/2", "-0.5 * ((", "-(("),
    (4, "the model not handed back in its mode", "model.train(was_training)", "pass"),
    (4, "AA runs every layer", "depth=max(layers) + 1", "depth=None"),
    (4, "gradients not turned on", "with torch.enable_grad(), _frozen(model):", "with _frozen(model):"),
    (5, "a float for the integer index", "n * keep // 10**6", "(n.double() * (1 - p)).long()"),
    (5, "above the threshold, not at or above", "drop = scores >= thr", "drop = scores > thr"),
    (5, "q as the probability to keep", "bernoulli((B, H, T, T), q,", "bernoulli((B, H, T, T), 1 - q,"),
    (6, "no guard", "drop.view(torch.uint8).mul_(1 - lost)", "drop"),
    (6, "padding queries masked", "real[:, None, :, None] & real[:, None, None, :]", "real[:, None, None, :]"),
    (7, "the parity flipped", "epoch % 2 == 0", "epoch % 2 == 1"),
    (8, "A_l not multiplied in", "scores[l] = attns[l] * total / m", "scores[l] = total / m"),
    (8, "a left Riemann sum", "torch.arange(1, m + 1,", "torch.arange(0, m,"),
    (9, "p alone for p q", "(B, H, T, T), p * q,", "(B, H, T, T), p,"),
    (9, "one mask for every head", "attention_mask.device)", "attention_mask.device)[:, :1].repeat(1, H, 1, 1)"),
    (10, "a mean for the sum", 'reduction="sum"', 'reduction="mean"'),
]


def written(n, source=None):
    """The exercise file with only exercise n written, from the real text or from `source` (a mistake in n)."""
    e = make.BY_NUMBER[n]
    return make.blank(e.file, source or (ROOT / e.file).read_text(), [m.number for m in make.EXERCISES if m.number != n])


def mistaken(n, old, new):
    """The real text of exercise n's file with `old` replaced by `new` inside exercise n's body."""
    def edit(e, _, body):
        assert e.number != n or body.count(old) == 1, f"the wrong answer {old!r} is not once in the body of {e.name}"
        return body.replace(old, new) if e.number == n else None
    return make.splice(make.BY_NUMBER[n].file, (ROOT / make.BY_NUMBER[n].file).read_text(), edit)


def pytest_run(args):
    """pytest.main(args) in a worker of runs(): exit code, output, the worker's pid, and model or addrop if an
    earlier run had imported them. Without unraisableexception: its gc.collect()s at exit cost a third of a run."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the lessons use no plugin
    sys.dont_write_bytecode = False  # under PYTHONDONTWRITEBYTECODE=1 each run would rewrite the lessons' asserts
    os.chdir(ROOT)
    torch.set_num_threads(1)  # as many runs at a time as cores: one thread each, none waiting on another's
    left, out = [m for m in ("model", "addrop") if m in sys.modules], io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(["-p", "no:cacheprovider", "-p", "no:unraisableexception", *map(str, args)]))
    return code, out.getvalue(), os.getpid(), left


def where(tmp_path_factory, key, name):
    """The path of run `key`'s exercise file `name`: a folder of its own, outside exercises/."""
    return tmp_path_factory.getbasetemp() / re.sub(r"\W+", "_", "-".join(map(str, key)))[:40] / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every lesson run of the tests below, {key: pytest_run(args)}, or a wrong answer's reason it cannot be
    written, which fails its test alone. Each run needs an interpreter of its own, where --impl imports before
    any test: a pool forked from a server that has imported torch and pytest, one run per worker
    (maxtasksperchild) and per hand-out (chunksize; by default a worker runs a chunk in one interpreter)."""
    def run(key, e, text, *extra, test=None):
        (path := where(tmp_path_factory, key, e.file)).parent.mkdir()
        path.write_text(text)
        jobs[key] = [test or make.TESTS[e.file], "--impl", path, "--exercise", e.number, *extra]
    jobs, failed = {("real",): [*make.TESTS.values(), "--impl", "model.py", "--impl", "addrop.py", "-m", "exercise"]}, {}
    for n, mistake, old, new in WRONG:
        try:
            run(("wrong", n, mistake), make.BY_NUMBER[n], written(n, mistaken(n, old, new)), "-x", "-q")
        except AssertionError as reason:
            failed["wrong", n, mistake] = str(reason)
    blank, e6 = make.generate(), make.BY_NUMBER[6]
    for e in make.EXERCISES:
        run(("written", e.number), e, written(e.number), "-q")
        run(("blank", e.number), e, blank[e.file], "-x", "-q")
    run(("stale",), e6, written(6).replace("from model import bernoulli, sync_free", ""))  # a line of make.py's deleted
    run(("pairing",), e6, blank["addrop.py"], test="test_model.py")  # exercise 6 given the lessons of exercise 1
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch._dynamo", "pytest"])  # _dynamo: checkpoint.py's meta-device op
    with context.Pool(maxtasksperchild=1) as pool:
        return {**dict(zip(jobs, pool.map(pytest_run, jobs.values(), chunksize=1))), **failed}


@pytest.mark.parametrize("file", make.TESTS)
def test_committed_files_are_generated(file):
    """(a) The committed exercise file is, outside the exercise bodies, what exercises/make.py makes of
    the real file as it is now: a change to model.py or addrop.py reaches the exercises. The bodies are
    the student's: answers written there keep this test green."""
    text = (ROOT / "exercises" / file).read_text()
    try:
        diff = make.stale(file, text, f"exercises/{file}")
    except SyntaxError as e:
        pytest.skip(f"exercises/{file} does not parse (line {e.lineno}): an answer being written")
    assert not diff, f"exercises/{file} is out of date: run python exercises/make.py\n{diff}"


@pytest.mark.parametrize("file", make.TESTS)
def test_rewrite_keeps_the_answers(file):
    """(b) The blank file is the real one outside the bodies, signatures and docstrings included (stale
    finds no difference; it finds an edited docstring). python exercises/make.py after a core change: the
    student's answer (the file's first exercise, with a mistake of WRONG so that it is not the real body) is
    kept line for line, the other exercises take the new blanks, and every line outside the bodies (here
    the module docstring, as the core change edited it) is what make.py writes now."""
    real = (ROOT / file).read_text()
    assert make.stale(file, real, file) == "" and make.stale(file, real.replace('"""', '""" Edited.', 1), file)
    numbers = [e.number for e in make.EXERCISES if e.file == file]
    _, _, old, new = next(w for w in WRONG if w[0] == numbers[0])
    student = make.blank(file, real, numbers=numbers[1:]).replace(old, new)
    fresh = make.blank(file, real.replace('"""', '""" Edited.', 1))
    text, kept = make.keep_answers(file, fresh, student)
    assert kept == [numbers[0]] and list(make.answers(file, text)) == [numbers[0]]
    assert make.outside_bodies(file, text) == make.outside_bodies(file, fresh)
    assert new in text and old not in text and '""" Edited.' in text
    assert make.keep_answers(file, fresh, fresh) == (fresh, [])  # nothing answered: the new blank file as it is


@pytest.mark.parametrize("test", make.TESTS.values())
def test_markers_tie_every_exercise_to_lessons(test):
    """(c) Every exercise has lessons in its file's tests; every marker names an exercise of that file; and
    make.py, which writes the blanks' messages and RESULTS' table from the markers, reads them as pytest does."""
    module = __import__(test[:-3])  # the module pytest collected, where it did
    for name, _, numbers in make.lessons(test):
        assert list(numbers) == [n for m in getattr(getattr(module, name), "pytestmark", []) if m.name == "exercise"
                                 for n in m.args], name
        assert all(make.TESTS[make.BY_NUMBER[n].file] == test for n in numbers if n in make.BY_NUMBER) and \
            set(numbers) <= set(make.BY_NUMBER), f"{name} is marked exercise{numbers}: no such exercise of {test}"
    for e in (e for e in make.EXERCISES if make.TESTS[e.file] == test):
        assert any(e.number in numbers for _, _, numbers in make.lessons(test)), f"exercise {e.number}: no lesson"


def test_tables_and_tips_agree_with_the_markers():
    """(c) RESULTS.md's exercise table is what make.py writes; README.md's table gives each exercise's
    number, function and command; a tip's "lesson N" is one of its exercise's lessons."""
    results = (ROOT / "RESULTS.md").read_text()
    assert make.with_table(results) == results, "RESULTS.md's exercise table is out of date: run python exercises/make.py"
    rows = re.findall(r"^(\d+) \| `([\w.]+)` \|.*\| (?:`(.*)`|… (\d+))$", (ROOT / "README.md").read_text(), re.M)
    assert [(int(n), name) for n, name, _, _ in rows] == [(e.number, e.name) for e in make.EXERCISES]
    assert all(cmd in ("", make.command(make.BY_NUMBER[int(n)])) and short in ("", n) for n, _, cmd, short in rows)
    for e in make.EXERCISES:
        labels = [label for _, label, numbers in make.lessons(make.TESTS[e.file]) if e.number in numbers]
        assert set(re.findall(r"[Ll]esson (\w+)", e.tip or "")) <= set(labels), f"exercise {e.number}'s tip"


def test_real_files_pass_every_lesson(runs):
    """(d) The real model.py and addrop.py, passed through --impl as a student's files are (no --exercise, as
    in the capstone), pass every lesson that checks an exercise; the header shows that --impl took effect.
    The lessons that check none (loading, speed-ups) run on the real files in the suite itself."""
    code, out, _, _ = runs["real",]
    assert code == 0 and "implementations: model from model.py, addrop from addrop.py" in out and " deselected" in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_blank_fails_its_lessons(e, runs, tmp_path_factory):
    """(e) The blank file fails the command that exercise e's message prints (the first failure stops
    the run) with exercise e's own message, printed without a traceback by conftest.py: every other
    exercise, blank too, is replaced by the real code, so none can stand in the way. The file lies
    outside exercises/, and the message names it where it lies. The run had an interpreter of its own,
    no model or addrop imported before it, a pid no other run had: after a run that imported the real
    addrop.py, in its interpreter, a blank would pass. The pool's default chunksize does just that."""
    code, out, pid, left = runs["blank", e.number]
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    assert left == [] and [r[2] for r in runs.values() if not isinstance(r, str)].count(pid) == 1
    path = str(where(tmp_path_factory, ("blank", e.number), e.file))
    assert make.message(e).replace(f"exercises/{e.file}", path) in out and "Traceback" not in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_exercise_written_alone_passes(e, runs):
    """(f) The blank file with only exercise e written (its real body put back, every other exercise
    still blank) passes the command that e's message prints: each exercise can be done first."""
    code, out, _, _ = runs["written", e.number]
    assert code == 0 and re.search(r"\b\d+ passed", out), out


@pytest.mark.parametrize("n, mistake, old, new", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answers_fail_in_words(n, mistake, old, new, runs):
    """(g) Each held-back wrong answer, written alone into the blank file, fails its exercise's command, naming the
    exercise (and test_addrop.py's lesson by number, as tips do) and what was measured, with no tensor printed whole
    and no traceback. One whose text is no longer in the body fails here alone, naming it and the function."""
    if isinstance(runs["wrong", n, mistake], str):
        pytest.fail(runs["wrong", n, mistake])
    code, out, _, _ = runs["wrong", n, mistake]
    lesson = r", lesson \d+\w?" if make.BY_NUMBER[n].file == "addrop.py" else ""
    assert code == 1 and re.search(rf"Exercise {n} \({make.BY_NUMBER[n].name}\){lesson}: ", out), out
    assert "tensor(" not in out and "Traceback" not in out, out


def test_usage_errors_say_what_to_do(runs):
    """(h) Refused before any lesson runs (exit 4, no traceback): a student's file with a line of make.py's
    deleted (its import of bernoulli, which exercise 6's real neighbours need), naming the line and
    python exercises/make.py; --exercise 6 given test_model.py, naming test_addrop.py and the command."""
    code, out, _, _ = runs["stale",]
    assert code == 4 and "-from model import bernoulli" in out and "Run python exercises/make.py" in out, out
    code, out, _, _ = runs["pairing",]
    assert code == 4 and "its lessons are in test_addrop.py" in out and "--exercise 6" in out and "Trace" not in out


def test_rebinding_refuses_what_it_cannot_rebind():
    """(i) --exercise N runs the real code of the other exercises in the student's module: a plain function
    reads that module as its globals; a wrapper (its code is the wrapper's, the function it wraps skipped),
    a closure (its cells would be lost) or another callable is refused, naming the function."""
    plain = types.FunctionType(compile("def f():\n    return helper()", "f", "exec").co_consts[0], {})
    wrapper = types.FunctionType(plain.__code__, {})
    wrapper.__wrapped__ = plain  # as functools.wraps leaves a decorator's wrapper
    student = types.ModuleType("student")
    student.helper = lambda: "the student's"
    assert impl.rebound(plain, student, "f")() == "the student's"
    for fn in (wrapper, (lambda x: lambda: x)(1), staticmethod(plain)):
        with pytest.raises(impl.ImplError, match="the real Layer.forward is not a plain function"):
            impl.rebound(fn, student, "Layer.forward")


@pytest.mark.parametrize("actual, expected, says", [
    ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0], "a flipped sign?"), ([0.25, 0.5, 0.75], [1.0, 2.0, 3.0], "/ 4: a mean for"),
    ([3.0, 6.0, 9.0], [1.0, 2.0, 3.0], "3 x expected: a sum for"), ([4.0, 7.0, 2.0], [4.0, 6.0, 2.0], "off by one"),
    ([[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]], "a transpose?"), ([1.0, 0.0, 0.5], [0.0, 1.0, 1.0], None)])
def test_checks_name_the_usual_slips(actual, expected, says):
    """(j) A failed check names the slip its numbers show (checks._slip: a factor -1, 1/N or N to 1e-3,
    integers off by exactly one, the sizes in another order), and none where they show none (the last)."""
    with pytest.raises(checks.Wrong) as failed:
        checks.close(torch.tensor(actual), torch.tensor(expected), "x", atol=1e-9)
    assert (says in str(failed.value)) if says else "?" not in str(failed.value), str(failed.value)

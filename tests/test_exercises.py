"""
The exercises are honest: each exercise file, exercises/NN_name.py, shows its function's contract and no line
of its answer, and names no function that the answer calls; its hints come one at a time; each exercise is
checked alone, by the command its blank body prints, with the real code for everything else; that command
tells a wrong answer from a right one, in words; and the lessons each exercise names are those its markers say.
The wrong answers, held back from the student, are common mistakes, each written out whole as a student would hand
it in (tests/wrong_answers.py); every one must fail its exercise's command in words, SAYS below naming the mistake.
"""

import ast
import contextlib
import inspect
import io
import json
import multiprocessing
import os
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exercises"))
import checks  # noqa: E402
import hint  # noqa: E402
import impl  # noqa: E402

from wrong_answers import RIGHT, WRONG  # noqa: E402  tests/, beside this file

make = impl.make  # exercises/make.py

# what the failure of a wrong answer must say, beyond its exercise and lesson
SAYS = {(1, "no 1/sqrt(D)"): "scaled by 1 (not scaled); expected them scaled as Eq. 1 scales them, by 1/sqrt(D)",
        (1, "M_l ignored"): "the entry masked with -inf has attention 1.0e-01; expected exactly 0",
        (1, "the softmax over the queries"): "the softmax taken over the queries",
        (1, "no padding mask"): "with no padding mask",
        (1, "heads on interleaved channels"): "head h on the channels h, h + H",
        (1, "heads by a straight reshape"): "reshaped straight to (B, H, T, D)",
        (1, "M times -inf"): "0 x -inf is NaN",
        (1, "M transposed"): "M transposed; expected M[b, h, i, j] to drop query i's key j",
        (1, "v in tokens first"): "attention returned v of shape (3, 9, 4, 8); expected (B, H, T, D) = (3, 4, 9, 8)",
        (2, "the labels given ignored"): "returned as the labels to attribute the model's predictions (Eq. 4); "
                                         "expected the labels given",
        (2, "dropped_A not passed on"): "returned the maps before attention dropout: the model was not handed dropped_A",
        (2, "probes not passed on"): "returned logits that do not depend on the probes of layers [0, 1, 2]",
        (2, "IGNORE not kept in a token task's pseudo labels"): "whose batch label is IGNORE got a class; expected "
                                                                "IGNORE kept there",
        (2, "the least likely class"): "returned as the labels to attribute the least likely classes (an argmin)",
        (2, "example 0's pseudo label for all"): "returned as the labels to attribute [2, 2, 2, 2], where the model "
                                                 "predicts [2, 2, 0, 1]",
        (2, "the gold labels by default"): 'returned as the labels to attribute the gold labels batch["labels"]',
        (2, "the pseudo labels over the batch"): "returned pseudo labels of shape (3,)",
        (2, "the forward under no_grad"): "the maps your forward returned carry no autograd graph (requires_grad False",
        (3, "a mean for the sum"): "is 1/4 of the change of example 0's own pseudo-label logit",
        (3, "the log-probability for the logit"): "the sum of the labels' log-probabilities (log-softmax), not of "
                                                  "their logits",
        (3, "regression without the 1/2"): "actual = 2 x expected: every entry 2 times what is expected",
        (3, "regression logits (B, 1) against labels (B,)"): "broadcasts to (B, B)",
        (4, "one backward per layer"): "for 3 layers the gradient flowed back through the logits 3 times; expected once",
        (4, "the map before attention dropout in train mode"): "the authors' first pass, against the same computed on "
                                                               "the dropped, rescaled maps of model(..., dropped_A=True)",
        (4, "the labels given ignored"): "B_l of the gold labels differs from B_l of the pseudo labels by only 0.0e+00 "
                                         "on examples 1 and 3, where the gold label is not the prediction",
        (4, "F.backward(), filling every parameter's .grad"): "attribute(method='ga') left .grad set on 57 parameters; "
                                                              "expected none",
        (5, "a float for the integer index"): "int(n (1 - p)) is 1, though in floating point 10 * (1 - 0.9) is "
                                              "0.9999999999999998",
        (5, "the index one place too high"): "your drops are those of the threshold read one place higher",
        (5, "n (1 - p) rounded"): "int(n (1 - p)) = int(6.7) = 6, the floor (yours are those of index 7, n (1 - p) "
                                  "rounded)",
        (5, "padding counted in n"): "padding counted in n, sorted above every real key",
        (5, "padding counted in n, sorted first"): "padding counted in n, sorted below every real key",
        (5, "padding sorted with its scores, counted in n"): "padding counted in n and sorted with its own scores",
        (5, "p to 2 decimals"): "yours are those of p = 0.12, p rounded to 2 decimals",
        (5, "the GPU path sorts padding first"): "with model.sync_free(device) True (the path a GPU and torch.compile "
                                                 "take, forced here on the CPU), against Eq. 6-7 taken literally",
        (5, "p and 1 - p swapped"): "the threshold read at b^[int(n p)], p and 1 - p swapped",
        (6, "no guard"): "p = 1.0, q = 1: dropped key indices 0-3; expected none: every real key is a candidate, and a "
                         "row that would lose them all keeps them all",
        (6, "the guard clears the whole head"): "whole rows with no drop at all, rows that keep some real key",
        (6, "padding queries masked"): "dropped keys in the rows of the padding queries at query indices 4-5",
        (7, "the parity flipped"): "epoch 1: yours runs AD-DROP, Algorithm 1 runs the original fine-tuning there",
        (8, "A_l not multiplied in"): "the mean gradient along the path, not multiplied by A_l",
        (8, "pseudo labels taken anew at each step"): "for each step's own predicted class (pseudo labels taken anew",
        (8, "a left Riemann sum"): "the gradient at the zero map, the start of the path (k = 0: a left Riemann sum)",
        (8, "the sum not divided by m"): "A_l times the sum of the m steps' gradients, not divided by m",
        (8, "the chain rule's k/m"): "multiplied by k/m (the derivative of the function A -> F(k/m A)",
        (8, "a plain loop that does not turn gradients on"): "integrated_gradients called directly under torch.no_grad() "
                                                             "(as an evaluation loop or a notebook may call it) raised",
        (9, "p alone for p q"): "of 15512 real pairs; expected p q x 15512 = 1551",  # the count dropped is a draw
        (9, "a fixed count of candidates a row"): "each row's count of drops spreads by",
        (9, "real pairs only, no guard"): "random_mask(p = 1, q = 1) drops every real key in",
        (9, "the generator ignored"): "torch's default stream seeded 123 and then 456, gave masks that differ",
        (9, "one mask for every head"): "the same mask as head 0",
        (9, "the scores' top p as candidates"): "(yours are near q alone: every real key a candidate, as the top p of "
                                                "scores that all tie would make them)",
        (10, "log-softmax over the tokens"): "the log-probabilities taken over the tokens (log_softmax on axis 1)",
        (10, "a mean for the sum"): "the token attribution is 1/13 of -dL/dA_l",
        (10, "the raw logits for the log-probabilities"): "minus the sum of the labels' logits, not of their "
                                                          "log-probabilities",
        (10, "IGNORE counted as class 0"): "the loss with each IGNORE token counted as class 0",
        (11, "the mirror strategy dropped"): "addrop_masks with mask='low': layer 0's mask differs from the real one",
        (11, "gold ignored"): "addrop_masks with gold=True: layer 0's mask differs from the real one",
        (11, "masks for the selected layers only"): "addrop_masks on layers [0] returned list of 1 entries; expected a "
                                                    "list of 3 entries, one per layer of the model",
        (11, "an attribution for RD too"): "the masks with method='rd' (first_pass='eval') ran the encoder 1 time(s); "
                                           "expected never",
        (11, "the layers drawn sorted"): "your masks are the real ones drawn in another order of the layers ([0, 2], "
                                         "same seed); expected them drawn in the order `layers` lists them, [2, 0]",
        (11, "masks up to the highest selected layer"): "addrop_masks on layers [0] returned list of 1 entries; "
                                                        "expected a list of 3 entries",
        (11, "regression not handed on"): "addrop_masks with regression=True: layer 0's mask differs from the real one",
        (11, "masks of the selected layers only, appended"): "addrop_masks on layers [0] returned list of 1 entries",
        (11, "the model left in eval mode"): "addrop_masks handed the model back in eval mode; it came in train mode",
        (11, "an attribution by backward()"): "the model came in train mode and ran in addrop_masks(method='ga') as: "
                                              "train mode, eval mode; expected the first pass in eval mode",
        (11, "the layers in reversed order"): "your masks are the real ones drawn in another order of the layers ([2, "
                                              "0], same seed); expected them drawn in the order `layers` lists them, "
                                              "[0, 2]",
        (11, "first_pass not handed on"): "addrop_masks with first_pass='train': layer 0's mask differs",
        (11, "m not handed on"): "addrop_masks with method='iga', m=3: layer 0's mask differs",
        (11, "the method ignored"): "the masks with method='rd' (first_pass='eval') ran the encoder 1 time(s)"}
# what a later lesson says of a wrong answer that an earlier one stops under -x: the run of every lesson, in
# exercise 6's terms where only exercise 6 is the student's
SAYS_LATER = {(6, "no guard"): "lesson 7: drop_mask(p = 0.1, q = 1) on integer scores with ties: it drops every "
              "real key in 2 rows of real queries",
              (6, "padding queries masked"): "lesson 7: drop_mask(p = 0.1, q = 0.1) on continuous scores: it drops 3 "
              "positions in rows of padding queries or on padding keys; expected none there"}


def written(e, source=None):
    """Exercise e's file with an answer written in: `source`, the whole function as a student hands it in, or
    by default the real code's (its signature and body, copied from the core: the answer every lesson must
    pass)."""
    return make.contract(e) + (source if source is not None else make.signature(e) + make.real_body(e))


def shown(e):
    """What the student sees of exercise e before asking for a hint: its file as make.py writes it."""
    return make.blank(e)


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
    """Every lesson run of the tests below, {key: pytest_run(args)}. Each run needs an interpreter of its own, where --impl loads before
    any lesson: a pool forked from a server that has imported torch and pytest, one run per worker
    (maxtasksperchild) and per hand-out (chunksize; by default a worker runs a chunk in one interpreter)."""
    def run(key, e, text, *extra, test=None, name=None):
        (path := where(tmp_path_factory, key, name or Path(e.path).name)).parent.mkdir()
        path.write_text(text)
        jobs[key] = [test or make.TESTS[e.file], "--impl", path, *extra]
        return path
    jobs = {}
    for n, mistake, source in WRONG:
        run(("wrong", n, mistake), make.BY_NUMBER[n], written(make.BY_NUMBER[n], source), "-x", "-q")
    for n, answer, source in RIGHT:
        run(("right", n, answer), make.BY_NUMBER[n], written(make.BY_NUMBER[n], source), "-q")
    for n, mistake, source in WRONG:
        if (n, mistake) in SAYS_LATER:
            run(("later", n, mistake), make.BY_NUMBER[n], written(make.BY_NUMBER[n], source), "-q")
    for e in make.EXERCISES:
        run(("written", e.number), e, written(e), "-q")
        run(("blank", e.number), e, shown(e), "-x", "-q")
    everything = where(tmp_path_factory, ("real",), "x").parent
    everything.mkdir()
    for e in make.EXERCISES:
        (everything / Path(e.path).name).write_text(written(e))
    jobs["real",] = [*make.TESTS.values(), "--impl", everything]
    e5, e1 = make.BY_NUMBER[5], make.BY_NUMBER[1]
    run(("pairing",), e5, shown(e5), test=make.TESTS["model.py"])  # exercise 5 given the lessons of exercise 1
    run(("no function",), e5, make.contract(e5) + "def cut(scores):\n    return scores\n")
    run(("signature",), e5, make.contract(e5) + "def threshold(scores, p):\n    return scores[..., :1]\n")
    run(("redefines",), e5, written(e5) + "\n\ndef bernoulli(shape, prob, generator=None, device=None):\n    pass\n")
    run(("not an exercise",), e1, written(e1), name="attention.py")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch._dynamo", "pytest"])  # _dynamo: checkpoint.py's meta-device op
    with context.Pool(maxtasksperchild=1) as pool:
        return dict(zip(jobs, pool.map(pytest_run, jobs.values(), chunksize=1)))


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_committed_files_are_generated(e):
    """(a) The committed exercise file is, above its def, what exercises/make.py writes from the contract as it
    is now, and its def is the real signature: a change to the contract or to the real signature reaches the
    exercises. The body is the student's: an answer written there keeps this test green."""
    text = (ROOT / e.path).read_text()
    assert make.refreshed(e, text) == text and make.signature(e) in text, \
        f"{e.path} is out of date: run python exercises/make.py (it keeps your answer)"
    assert set(p.name for p in (ROOT / "exercises").glob("[0-9]*.py")) == set(make.BY_PATH), "an exercise file too many"


def _code_lines(text):
    """The lines of code in text, stripped, comments cut; lines of brackets alone left out."""
    lines = (line.split("  # ")[0].split("# ")[0].strip() for line in text.splitlines())
    return {line for line in lines if line and not re.fullmatch(r"[()\[\]{},:]+", line)}


def _project_functions():
    """The names of every function and method that model.py and addrop.py define (forward and dunders aside:
    a model's call is its forward)."""
    names = set()
    for file in ("model.py", "addrop.py"):
        for node in ast.walk(ast.parse((ROOT / file).read_text())):
            if isinstance(node, ast.FunctionDef) and node.name != "forward" and not node.name.startswith("__"):
                names.add(node.name)
    return names


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_contract_holds_no_line_of_the_answer(e):
    """(b) What the student sees of exercise e before asking for a hint, its file as make.py writes it, holds no
    line of the real body (code, comments cut), and names no project function that the real body calls:
    the contract says what, the hints say how. The hints do hold the recipe: the last one quotes the body.
    One exception, narrow: a method of an input (the model's pieces, as model.encoder.embed) that the contract
    must state as that input's interface, with what it takes and returns, may be named when the exercise lists
    it as given (make.Exercise.given) and the contract writes it as a call on a parameter of the signature,
    followed by its outputs (model.encoder.embed(input_ids, ...) -> (x, pad)): an interface, not a step; and
    likewise a function of the exercise's own module handed to the student as a tool, written as a call on
    the module with its outputs (addrop.layer_masks(scores, ...) -> [M_l])."""
    student, body = shown(e), make.real_body(e)
    leaked = _code_lines(body) & _code_lines(student)
    assert not leaked, f"{e.path} shows lines of its answer: {sorted(leaked)[:3]}"
    calls = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
             for n in ast.walk(ast.parse(make.signature(e) + body)) if isinstance(n, ast.Call)
             and isinstance(n.func, (ast.Name, ast.Attribute))}
    params = list(inspect.signature(getattr(impl.importlib.import_module(e.file[:-3]), e.name)).parameters)
    for name in e.given:
        assert re.search(rf"\b(?:{'|'.join([*params, e.file[:-3]])})(?:\.\w+)*\.{name}\([^)]*\) -> ", student), \
            f"{e.path}: {name}, given, is not stated as a call on an input with its outputs (model.x.{name}(...) -> ...)"
    named = sorted(name for name in calls & _project_functions() - {e.name} - set(e.given)
                   if re.search(rf"\b{name}\b", student))
    assert not named, f"{e.path} names {named}, which its answer calls"
    assert "def " + e.name in student and "raise NotImplementedError" in student


def test_hints_come_one_at_a_time(tmp_path, monkeypatch, capsys):
    """(b) Every exercise has at least two hints, the last the recipe; python exercises/hint.py N shows one
    more each call (the first call the first hint alone), stays at the last, and counts them per exercise in
    an ignored file, which --count reports."""
    monkeypatch.setattr(hint, "COUNT", tmp_path / "hints.json")
    assert "exercises/.hints.json" in (ROOT / ".gitignore").read_text().split()
    for e in make.EXERCISES:
        assert len(e.hints) >= 2 and all(h.strip() for h in e.hints), f"exercise {e.number}: too few hints"
        for k in range(1, len(e.hints) + 2):
            hint.main([str(e.number)])
            out = capsys.readouterr().out
            k = min(k, len(e.hints))
            assert f"hint {k} of {len(e.hints)}" in out and all(h.split("\n")[0] in out for h in e.hints[:k])
            assert not any(h.split("\n")[0] in out for h in e.hints[k:]), f"exercise {e.number}: hint {k + 1} shown early"
    assert json.loads((tmp_path / "hints.json").read_text()) == {str(e.number): len(e.hints) for e in make.EXERCISES}
    hint.main(["--count"])
    assert "exercise 11 addrop_masks" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        hint.main(["12"])
    (tmp_path / "hints.json").write_text('{"2": ')  # cut short: the hints go on, the count starts again
    hint.main(["2"])
    out = capsys.readouterr().out
    assert "does not read as a hint count (JSONDecodeError); the count starts again" in out and "hint 1 of" in out
    assert json.loads((tmp_path / "hints.json").read_text()) == {"2": 1}


@pytest.mark.parametrize("test", make.TESTS.values())
def test_markers_tie_every_exercise_to_lessons(test):
    """(c) Every exercise has lessons in its module's lesson file; every marker names an exercise of that
    module; and make.py, which writes the blanks' messages and RESULTS' table from the markers, reads them as
    pytest does."""
    module = __import__(Path(test).stem)  # the module pytest collected, where it did
    for name, _, numbers in make.lessons(test):
        assert list(numbers) == [n for m in getattr(getattr(module, name), "pytestmark", []) if m.name == "exercise"
                                 for n in m.args], name
        assert all(make.TESTS[make.BY_NUMBER[n].file] == test for n in numbers if n in make.BY_NUMBER) and \
            set(numbers) <= set(make.BY_NUMBER), f"{name} is marked exercise{numbers}: no such exercise of {test}"
    for e in (e for e in make.EXERCISES if make.TESTS[e.file] == test):
        assert any(e.number in numbers for _, _, numbers in make.lessons(test)), f"exercise {e.number}: no lesson"


def test_tables_agree_with_the_markers():
    """(c) RESULTS.md's exercise table is what make.py writes; README.md's table gives each exercise's number,
    function and file, and the command of the first."""
    results = (ROOT / "RESULTS.md").read_text()
    assert make.with_table(results) == results, "RESULTS.md's exercise table is out of date: run python exercises/make.py"
    rows = re.findall(r"^(\d+) \| `([\w.]+)` \| \[?([\w/.]+)", (ROOT / "README.md").read_text(), re.M)
    assert [(int(n), name, path.split("/")[-1]) for n, name, path in rows] == \
        [(e.number, e.name, Path(e.path).name) for e in make.EXERCISES]
    assert make.command(make.EXERCISES[0]) in (ROOT / "README.md").read_text()


def test_real_answers_pass_every_lesson(runs):
    """(d) The real bodies, written into every exercise file and given as the folder (as in the capstone),
    pass every lesson that checks an exercise; the header shows that --impl took effect. The lessons that
    check none (loading, speed-ups) run on the real files in the suite itself."""
    code, out, _, _ = runs["real",]
    assert code == 0 and "exercises 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 from" in out and " deselected" in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_blank_fails_its_lessons(e, runs, tmp_path_factory):
    """(e) The blank file fails the command that exercise e's message prints (the first failure stops the run)
    with exercise e's own message, printed without a traceback by plugin.py: every other exercise is the real
    code. The file lies outside exercises/, and the message names it where it lies. The run had an
    interpreter of its own, no model or addrop imported before it, a pid no other run had."""
    code, out, pid, left = runs["blank", e.number]
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    assert left == [] and [r[2] for r in runs.values() if not isinstance(r, str)].count(pid) == 1
    path = str(where(tmp_path_factory, ("blank", e.number), Path(e.path).name))
    assert make.message(e).replace(e.path, path) in out and "Traceback" not in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_exercise_written_alone_passes(e, runs):
    """(f) The exercise file with the real body written in passes the command that e's message prints, the
    real code for everything else: each exercise can be done first."""
    code, out, _, _ = runs["written", e.number]
    assert code == 0 and re.search(r"\b\d+ passed", out), out


@pytest.mark.parametrize("n, mistake, source", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answers_fail_in_words(n, mistake, source, runs):
    """(g) Each held-back wrong answer, written into its exercise file, fails its exercise's command, naming the
    exercise (and test_addrop.py's lesson by number), what was measured, and the hint command, with no tensor
    printed whole and no traceback; and a lesson's check names the mistake in SAYS's words: none is caught only
    by the error it runs into (plugin.py's "the lesson stopped on ...")."""
    code, out, _, _ = runs["wrong", n, mistake]
    lesson = r", lesson \d+\w?" if make.BY_NUMBER[n].file == "addrop.py" else ""
    assert code == 1 and re.search(rf"Exercise {n} \({make.BY_NUMBER[n].name}\){lesson}: ", out), out
    assert f"python exercises/hint.py {n}" in out and "tensor(" not in out and "Traceback" not in out, out
    assert (n, mistake) in SAYS, f"no words in SAYS for the wrong answer {mistake!r} of exercise {n}; it printed:\n{out}"
    assert SAYS[n, mistake] in out and "the lesson stopped on" not in out, out


@pytest.mark.parametrize("n, answer, source", RIGHT, ids=[f"{r[0]}-{r[1]}" for r in RIGHT])
def test_other_right_answers_pass(n, answer, source, runs):
    """(g') Each other right answer, written into its exercise file, passes every lesson of its exercise: the
    lessons hold a student to the law of Eq. 7's coins, not to one way of drawing them, and to Eq. 3's numbers,
    not to addrop.py's batched way of computing them."""
    code, out, _, _ = runs["right", n, answer]
    assert code == 0 and " passed" in out, out


@pytest.mark.parametrize("n, mistake", SAYS_LATER, ids=[f"{n}-{mistake}" for n, mistake in SAYS_LATER])
def test_later_lessons_name_the_symptom(n, mistake, runs):
    """(g) A wrong answer run through every lesson of its command (the student's command has no -x): a later
    lesson that fails too says what SAYS_LATER has for it, the symptom in its own exercise's terms, and never
    blames a piece that is the real code there."""
    code, out, _, _ = runs["later", n, mistake]
    assert code == 1 and SAYS_LATER[n, mistake] in out and "your candidates differ too" not in out, out


def test_usage_errors_say_what_to_do(runs):
    """(h) Refused before any lesson runs (exit 4, no traceback), naming the file and why: exercise 5 given
    exercise 1's lessons (naming test_addrop.py and the command); a file without the exercise's function; one
    whose function takes other arguments; one that redefines a function of the real module; a file not named
    as an exercise file."""
    says = {("pairing",): "lessons are in test_addrop.py, not in test_model.py", ("no function",): "defines no function threshold",
            ("signature",): "expected threshold(scores, real, p)",
            ("redefines",): "defines bernoulli, which addrop.py has already",
            ("not an exercise",): "not an exercise file"}
    for key, words in says.items():
        code, out, _, _ = runs[key]
        assert code == 4 and words in out and "Traceback" not in out, (key, out)

@pytest.mark.parametrize("actual, expected, says", [
    ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0], "every entry has the opposite sign"),
    ([0.25, 0.5, 0.75], [1.0, 2.0, 3.0], "expected / 4: every entry 1/4 of what is expected"),
    ([3.0, 6.0, 9.0], [1.0, 2.0, 3.0], "3 x expected: every entry 3 times"), ([4.0, 7.0, 2.0], [4.0, 6.0, 2.0], "off by exactly one"),
    ([[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]], "in another order"), ([1.0, 0.0, 0.5], [0.0, 1.0, 1.0], None)])
def test_checks_name_the_usual_slips(actual, expected, says):
    """(j) A failed check names the pattern its numbers show, as measured (checks._slip: a factor -1, 1/N or N
    to 1e-3, integers off by exactly one, the sizes in another order), and none where they show none (the
    last); it says what was measured, never what to write."""
    with pytest.raises(checks.Wrong) as failed:
        checks.close(torch.tensor(actual), torch.tensor(expected), "x", atol=1e-9)
    patterns = ("opposite sign", "every entry", "off by exactly one", "another order")
    assert (says in str(failed.value)) if says else not any(w in str(failed.value) for w in patterns), str(failed.value)

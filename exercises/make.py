"""
Writes the exercises: exercises/model.py and exercises/addrop.py are model.py and addrop.py
with the bodies of the functions in EXERCISES replaced by a NotImplementedError that says the
exercise's number, its equation, the lessons that check it and the command that runs them.
Signatures, docstrings and every other line stay those of the real files: the splice is done on
the text, so formatting is kept, and ast only says where each body starts and ends. model.py holds
the encoder alone; checkpoint.py, which loads the weights, is no exercise: it builds whichever
model.py is imported. Also writes the exercise table of RESULTS.md, between its two marker lines.

    python exercises/make.py           # after any change to model.py, addrop.py or a lesson: answers are kept
    python exercises/make.py --force   # start over: every body blank again, answers dropped

A lesson says which exercises it checks with a marker, @pytest.mark.exercise(2, 3) (pytest.ini);
--exercise N (conftest.py) runs exercise N's lessons alone, with the real code for every other
exercise, so they can be done in any order. test_exercises.py fails until the committed exercise
files and the table are what this writes.
"""

import ast
import difflib
import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "exercises"
TESTS = {"model.py": "test_model.py", "addrop.py": "test_addrop.py"}  # each file's lessons
TABLE = ("<!-- the exercise table: written by python exercises/make.py from the lessons' markers -->",
         "<!-- end of the exercise table -->")


class Exercise(NamedTuple):
    number: int
    file: str        # model.py or addrop.py
    name: str        # the function, or Class.method, whose body is blanked
    equation: str    # what it implements, in the paper's terms
    tip: str = None  # a comment above the blank body; "lesson N" there must be one of its lessons


# In the order of the paper and the tutorial: the encoder's attention (Eq. 1), the first pass and its
# pseudo labels (Eq. 4), the attribution (Eq. 5), the mask (Eq. 6-7), cross-tuning (Algorithm 1), then
# the variants. Lessons are numbered as in test_addrop.py.
EXERCISES = [
    Exercise(1, "model.py", "Layer.forward", "Eq. 1, attention with the padding mask and M_l",
             "A is multiplied by `scale` when one is given (integrated gradients,\n"
             "Eq. 3), and that A is used and handed out. Attention dropout: dropout() above; with\n"
             "dropped_A the dropped A (rescaled) is used and handed out, else it acts on A @ v only and\n"
             "A goes out as Eq. 1 defines it. first_only: cut A to its first query row and x to its\n"
             "first token BEFORE any dropout (A still goes out whole). It saves work, and in train mode\n"
             "it sets how many coins dropout draws: every later random number, hence a training run's\n"
             "result, depends on it."),
    Exercise(2, "addrop.py", "_unmasked_pass", "Eq. 4, the first pass and its pseudo labels"),
    Exercise(3, "addrop.py", "objective", "Eq. 5's F: the label's logit; -L for regression and tokens"),
    Exercise(4, "addrop.py", "attribute", "Eq. 5, all selected layers from ONE backward",
             "runs in eval mode (train mode for first_pass='train') and hands the model back in the\n"
             "mode it came in (lesson 2). ga: one forward (_unmasked_pass), one autograd.grad;\n"
             "iga: _integrated_gradients; aa: the maps of model.encoder(..., depth=max(layers) + 1),\n"
             "no layer above run (lesson 13)."),
    Exercise(5, "addrop.py", "drop_mask", "Eq. 6-7, the mask",
             "draw the coin flips as ONE bernoulli((B, H, T, T), q, generator, scores.device), True\n"
             "where a candidate is dropped (u = 0), so that lesson 7 sees its literal recipe's draws;\n"
             "end with _real_rows."),
    Exercise(6, "addrop.py", "_real_rows", "Eq. 6-7's edge cases: real pairs only, never a whole row"),
    Exercise(7, "addrop.py", "is_addrop_epoch", "Algorithm 1, cross-tuning"),
    Exercise(8, "addrop.py", "_integrated_gradients", "Eq. 3, integrated gradients",
             "Layer.forward's `scale` (B, 1, 1, 1) multiplies A. Lesson 5 wants the plain loop's\n"
             "numbers to 1e-10, however ig_budget cuts the m steps into chunks."),
    Exercise(9, "addrop.py", "random_mask", "Table 2's RD, the random baseline"),
    Exercise(10, "addrop.py", "pseudo_loss", "Appendix A Eq. 2, the pseudo loss of token tasks",
             "a sum, not a mean, over the tokens whose label is not IGNORE (lesson 16 moves the others)."),
]
BY_NUMBER = {e.number: e for e in EXERCISES}


class Lesson(NamedTuple):
    name: str        # the test function
    label: str       # "6b" for a docstring that opens "Lesson 6b.", else the name without test_
    exercises: tuple  # the numbers of its marker, @pytest.mark.exercise(...)


@functools.cache
def lessons(test_file):
    """The lessons of test_file, in file order, as their markers say, read from the source (the same
    decorators pytest reads: test_exercises.py checks that the two agree)."""
    out = []
    for node in ast.parse((ROOT / test_file).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marks = [d for d in node.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.exercise"]
            doc = re.match(r"Lesson (\w+)\.", ast.get_docstring(node) or "")
            numbers = tuple(ast.literal_eval(a) for m in marks for a in m.args)
            out.append(Lesson(node.name, doc[1] if doc else node.name.removeprefix("test_"), numbers))
    return out


def checked_by(e, names=True):
    """e's lessons (of TESTS[e.file]) in words: "lessons 1, 2 and 11"; unnumbered ones by name, or
    with names=False by their count and marker."""
    labels = [lesson.label for lesson in lessons(TESTS[e.file]) if e.number in lesson.exercises]
    if not names and not all(len(label) <= 3 for label in labels):
        return f"{len(labels)} lessons marked exercise({e.number})"
    return "lesson " + labels[0] if len(labels) == 1 else f"lessons {', '.join(labels[:-1])} and {labels[-1]}"


def command(e, path=None):
    """The command that runs exercise e's lessons on the student's file (or on the file at `path`)."""
    return f"python -m pytest {TESTS[e.file]} --impl {path or 'exercises/' + e.file} --exercise {e.number}"


def message(e):
    """What the blank body raises: first line for pytest's summary, then how to run its lessons."""
    others = any(o.file == e.file and o != e for o in EXERCISES)
    return (f"Exercise {e.number} ({e.equation}): write {e.name} in exercises/{e.file}\n"
            f"  checked by {TESTS[e.file]}'s {checked_by(e, names=False)}{', with the real code for the other exercises' if others else ''}:\n"
            f"  {command(e)}")


def table():
    """The exercise table of RESULTS.md, from EXERCISES and the lessons' markers."""
    rows = ["| # | write | equation | checked by (each lesson's docstring gives its tolerance) |", "|---|---|---|---|"]
    rows += [f"| {e.number} | `{e.file[:-3]}.{e.name}` | {e.equation} | {TESTS[e.file]}: {checked_by(e).replace('_', ' ')} |"
             for e in EXERCISES]
    free = [[lesson.label for lesson in lessons(t) if not lesson.exercises] for t in TESTS.values()]
    free = [f"{t}'s " + (", ".join(f) if all(len(x) <= 3 for x in f) else f"{len(f)} others") for t, f in zip(TESTS.values(), free)]
    return "\n".join(rows) + "\n\nThe lessons that check no exercise: " + "; ".join(free) + "."


def find(tree, qualname):
    """The def node of 'name' or 'Class.name' at the top level of a module; LookupError('no NAME')."""
    nodes = tree.body
    for part in qualname.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise LookupError(f"no {qualname}")
        nodes = node.body
    return node


def body_lines(fn, lines):
    """The 0-based line range [start, end) of fn's body after its docstring, and its indent. The body
    runs to the last line indented deeper than the def before the next statement or comment that is
    not, so that a comment a student leaves at the end of an answer still belongs to the answer."""
    doc = fn.body[0]
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
        raise ValueError(f"{fn.name} has no docstring: an exercise needs one to say what to write")
    if len(fn.body) < 2 or fn.body[1].lineno <= doc.end_lineno:
        raise ValueError(f"{fn.name}: the body must start on the line after the docstring")
    end = fn.end_lineno
    for i in range(fn.end_lineno, len(lines)):
        text = lines[i].rstrip()
        if text and len(text) - len(text.lstrip()) <= fn.col_offset:
            break
        if text:
            end = i + 1
    return doc.end_lineno, end, " " * doc.col_offset


def stub(e, indent):
    """The blank body: the tip as a comment, then the raise."""
    text = message(e)
    assert '"' not in text
    lines = [f"# Exercise {e.number}: " + e.tip.replace("\n", "\n#   ")] if e.tip else []
    lines += ["raise NotImplementedError(", '    "' + text.replace("\n", '\\n"\n    "') + '")']
    return "".join(indent + line + "\n" for part in lines for line in part.split("\n"))


def header(file):
    """The two comment lines that open an exercise file."""
    return (f"# {file} with the bodies of its exercises blanked, written by exercises/make.py. Write them in any\n"
            f"# order; each blank body's message gives the command that checks it, e.g.\n"
            f"#     {command(next(e for e in EXERCISES if e.file == file))}\n")


def blank(file, source, numbers=None):
    """source (the text of the real `file`) with the bodies of its exercises, or only of those
    whose number is in `numbers`, replaced by their stubs; the rest of the text as it is."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = [(*body_lines(find(tree, e.name), lines), e) for e in EXERCISES
             if e.file == file and (numbers is None or e.number in numbers)]
    for start, end, indent, e in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start:end] = [stub(e, indent)]
    return header(file) + "".join(lines)


def generate(numbers=None):
    """{file name: text of its exercise file}, from the real files as they are now."""
    return {file: blank(file, (ROOT / file).read_text(), numbers) for file in TESTS}


def outside_bodies(file, text):
    """text, an exercise file, with each exercise's body cut down to one line "<answer>": the part
    that this script owns, whatever a student has written in the bodies. Raises SyntaxError if text
    does not parse, LookupError if an exercise's function is missing."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits = [body_lines(find(tree, e.name), lines) for e in EXERCISES if e.file == file]
    for start, end, indent in sorted(edits, reverse=True):
        lines[start:end] = [indent + "<answer>\n"]
    return "".join(lines)


def stale(file, text, name):
    """Where `text`, a student's `file` (called `name` in the diff), differs outside the exercise
    bodies from what this script writes today (or from the real file: its header aside, the same): a
    few lines of diff, '' where it does not. Raises SyntaxError and LookupError as outside_bodies."""
    ours, theirs = (outside_bodies(file, t.removeprefix(header(file))) for t in (generate()[file], text))
    diff = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "python exercises/make.py writes", name,
                                n=0, lineterm="")
    return "\n".join(list(diff)[:12])


def answered(file, text):
    """Numbers of the exercises of `file` whose body in `text`, an exercise file, is no longer the blank one."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [e.number for e in EXERCISES if e.file == file]
    done = []
    for e in EXERCISES:
        if e.file == file:
            try:
                body = find(tree, e.name).body[1:]
            except LookupError:  # an exercise newer than the file: nothing written there yet
                continue
            if not (len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])):
                done.append(e.number)
    return done


def keep_answers(file, fresh, old):
    """fresh, what this script writes now, with the bodies of the exercises answered in old (the
    student's file, written from an older model.py or addrop.py) put back in: a rewrite after a core
    change loses no answer. Returns the text and the numbers kept; SyntaxError if old does not parse."""
    old_tree, old_lines = ast.parse(old), old.splitlines(keepends=True)
    tree, lines = ast.parse(fresh), fresh.splitlines(keepends=True)
    kept = [e for e in EXERCISES if e.file == file and e.number in answered(file, old)]
    edits = []
    for e in kept:
        start, end, _ = body_lines(find(old_tree, e.name), old_lines)
        edits.append((*body_lines(find(tree, e.name), lines)[:2], old_lines[start:end]))
    for start, end, body in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start:end] = body
    return "".join(lines), [e.number for e in kept]


def with_table(text):
    """text, RESULTS.md, with what lies between its TABLE marker lines replaced by table()."""
    start, end = text.index(TABLE[0]) + len(TABLE[0]), text.index(TABLE[1])
    return text[:start] + "\n" + table() + "\n" + text[end:]


if __name__ == "__main__":
    for file, text in generate().items():
        out, kept = HERE / file, []
        if out.exists() and "--force" not in sys.argv:
            try:
                text, kept = keep_answers(file, text, out.read_text())
            except SyntaxError as e:
                sys.exit(f"{out.relative_to(ROOT)} does not parse (line {e.lineno}: {e.msg}), so its answers "
                         "cannot be kept: fix it, or copy it somewhere and run python exercises/make.py --force")
        out.write_text(text)
        print(f"wrote {out.relative_to(ROOT)}" + (f", keeping your answers to exercises {kept}" if kept else ""))
    results = ROOT / "RESULTS.md"
    results.write_text(with_table(results.read_text()))
    print("wrote the exercise table of RESULTS.md")

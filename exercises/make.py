"""
Writes the exercises: exercises/model.py and exercises/addrop.py are model.py and addrop.py with the
bodies of the functions in EXERCISES replaced by a NotImplementedError that gives the exercise's number,
its equation, its lessons and the command that runs them; every other line is the real file's (ast says
where bodies start and end, the splice is done on the text). Also writes RESULTS.md's exercise table. A
lesson names the exercises it checks by a marker, @pytest.mark.exercise(2, 3) (pytest.ini).

    python exercises/make.py           # after any change to model.py, addrop.py or a lesson: answers are kept
    python exercises/make.py --force   # start over: every body blank again, answers dropped

test_exercises.py fails until the committed exercise files and the table are what this writes.
"""

import ast
import difflib
import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
TESTS = {"model.py": "test_model.py", "addrop.py": "test_addrop.py"}  # each file's lessons
TABLE = ("<!-- the exercise table: written by python exercises/make.py from the lessons' markers -->",
         "<!-- end of the exercise table -->")


class Exercise(NamedTuple):
    number: int
    file: str        # model.py or addrop.py
    name: str        # the function, or Class.method, whose body is blanked
    equation: str    # what it implements, in the paper's terms
    tip: str = None  # a comment above the blank body; "lesson N" there must be one of its lessons


# In the order of the paper and the tutorial: attention (Eq. 1), the first pass and its pseudo labels (Eq. 4),
# the attribution (Eq. 5), the mask (Eq. 6-7), cross-tuning (Algorithm 1), then the variants.
EXERCISES = [
    Exercise(1, "model.py", "Layer.forward", "Eq. 1, attention with the padding mask and M_l",
             "A is multiplied by `scale` when one is given (integrated gradients, Eq. 3), and that A is\n"
             "used and handed out. Attention dropout: dropout() above; with dropped_A the dropped A (rescaled)\n"
             "is used and handed out, else it acts on A @ v only and A goes out as Eq. 1 defines it.\n"
             "first_only: cut A to its first query row and x to its first token before A @ v and its dropout\n"
             "(A goes out whole; with dropped_A the whole A is dropped first, as it goes out): in train mode\n"
             "the cut sets how many coins dropout draws, hence a training run's result."),
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


@functools.cache
def lessons(test_file):
    """[(test name, label, its marker's exercise numbers)] of test_file in file order, read from the source
    (test_exercises.py checks that pytest reads the same); label: "6b" for a docstring "Lesson 6b. ...",
    else the name without test_."""
    out = []
    for node in ast.parse((ROOT / test_file).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marks = [d for d in node.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.exercise"]
            doc = re.match(r"Lesson (\w+)\.", ast.get_docstring(node) or "")
            numbers = tuple(ast.literal_eval(a) for m in marks for a in m.args)
            out.append((node.name, doc[1] if doc else node.name.removeprefix("test_"), numbers))
    return out


def checked_by(e, names=True):
    """e's lessons in words, "lessons 1, 2 and 11"; unnumbered ones by name, or with names=False by count."""
    labels = [label for _, label, numbers in lessons(TESTS[e.file]) if e.number in numbers]
    if not names and not all(len(label) <= 3 for label in labels):
        return f"{len(labels)} lessons marked exercise({e.number})"
    return "lesson " + labels[0] if len(labels) == 1 else f"lessons {', '.join(labels[:-1])} and {labels[-1]}"


def command(e):
    """The command that runs exercise e's lessons on the student's file."""
    return f"python -m pytest {TESTS[e.file]} --impl exercises/{e.file} --exercise {e.number}"


def message(e):
    """What the blank body raises: first line for pytest's summary, then how to run its lessons."""
    return (f"Exercise {e.number} ({e.equation}): write {e.name} in exercises/{e.file}\n"
            f"  checked by {TESTS[e.file]}'s {checked_by(e, names=False)}, with the real code for every other "
            f"exercise:\n  {command(e)}")


def table():
    """The exercise table of RESULTS.md, from EXERCISES and the lessons' markers."""
    rows = ["| # | write | equation | checked by (each lesson's docstring gives its tolerance) |", "|---|---|---|---|"]
    rows += [f"| {e.number} | `{e.file[:-3]}.{e.name}` | {e.equation} | {TESTS[e.file]}: {checked_by(e).replace('_', ' ')} |"
             for e in EXERCISES]
    free = [f"{len([x for x in lessons(t) if not x[2]])} of {t}'s" for t in TESTS.values()]
    return "\n".join(rows) + f"\n\nThe lessons that check no exercise: {' and '.join(free)}."


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
    """The 0-based line range [start, end) of fn's body after its docstring, and its indent; the body
    runs to its last line indented deeper than the def (a student's closing comment belongs to it)."""
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


def splice(file, text, new, missing=False):
    """text with the body of each exercise e of `file` replaced by new(e, indent, body) where that is not
    None. LookupError for an exercise's function not in text, unless missing=True: then it is passed over."""
    tree, lines, edits = ast.parse(text), text.splitlines(keepends=True), []
    for e in (e for e in EXERCISES if e.file == file):
        try:
            edits.append((*body_lines(find(tree, e.name), lines), e))
        except LookupError:
            if not missing:
                raise
    for start, end, indent, e in sorted(edits, key=lambda edit: edit[0], reverse=True):
        body = new(e, indent, "".join(lines[start:end]))
        lines[start:end] = [body] if body is not None else lines[start:end]
    return "".join(lines)


def blank(file, source, numbers=None):
    """source, the real `file`'s text, with its exercises' bodies (or those numbered in `numbers`) blanked."""
    return header(file) + splice(file, source, lambda e, indent, _: stub(e, indent) if numbers is None
                                 or e.number in numbers else None)


def generate(numbers=None):
    """{file name: text of its exercise file}, from the real files as they are now."""
    return {file: blank(file, (ROOT / file).read_text(), numbers) for file in TESTS}


def outside_bodies(file, text):
    """text, an exercise file, with each exercise's body cut down to one line "<answer>": the part this
    script owns, whatever a student wrote in the bodies. SyntaxError, LookupError as splice."""
    return splice(file, text, lambda e, indent, _: indent + "<answer>\n")


def stale(file, text, name):
    """A few lines of diff where `text`, a student's `file` called `name`, differs outside the bodies from
    what this script writes today (header aside: the real file does not), or ''. Raises as splice."""
    ours, theirs = (outside_bodies(file, t.removeprefix(header(file))) for t in (generate()[file], text))
    diff = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "python exercises/make.py writes", name,
                                n=0, lineterm="")
    return "\n".join(list(diff)[:12])


def answers(file, text):
    """{number: body} of the exercises of `file` answered in `text`, an exercise file: a body that is
    no longer the blank one (an exercise newer than the file has none). SyntaxError if text does not parse."""
    found = {}
    splice(file, text, lambda e, _, body: found.update({e.number: body}) if f'"Exercise {e.number} (' not in body
           else None, missing=True)
    return found


def keep_answers(file, fresh, old):
    """fresh, what this script writes now, with the answers of old (the student's file, maybe from an older
    model.py or addrop.py) put back in, and the numbers kept; SyntaxError if old does not parse."""
    kept = answers(file, old)
    return splice(file, fresh, lambda e, _, __: kept.get(e.number)), sorted(kept)


def with_table(text):
    """text, RESULTS.md, with what lies between its TABLE marker lines replaced by table()."""
    start, end = text.index(TABLE[0]) + len(TABLE[0]), text.index(TABLE[1])
    return text[:start] + "\n" + table() + "\n" + text[end:]


if __name__ == "__main__":
    for file, text in generate().items():
        out, kept = ROOT / "exercises" / file, []
        if out.exists() and "--force" not in sys.argv:
            try:
                text, kept = keep_answers(file, text, out.read_text())
            except SyntaxError as e:
                sys.exit(f"{out.relative_to(ROOT)} does not parse (line {e.lineno}: {e.msg}), so its answers "
                         "cannot be kept: fix it, or copy it somewhere and run python exercises/make.py --force")
        out.write_text(text)
        print(f"wrote {out.relative_to(ROOT)}" + (f", keeping your answers to exercises {kept}" if kept else ""))
    (ROOT / "RESULTS.md").write_text(with_table((ROOT / "RESULTS.md").read_text()))
    print("wrote the exercise table of RESULTS.md")

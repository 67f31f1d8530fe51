"""
Writes the exercises: exercises/model.py and exercises/addrop.py are model.py and addrop.py
with the bodies of the functions in EXERCISES replaced by a NotImplementedError that says the
exercise's number, its equation and the lessons that check it. Signatures, docstrings and
every other line stay those of the real files: the splice is done on the text, so formatting
is kept, and ast only says where each body starts and ends. model.py holds the encoder alone;
checkpoint.py, which loads the weights, is no exercise: it builds whichever model.py is imported.

    python exercises/make.py           # after any change to model.py or addrop.py
    python exercises/make.py --force   # also over a file holding a student's answers

test_exercises.py fails until the committed exercise files are what this writes.
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "exercises"

# Numbered in the order the lessons meet them, top to bottom: lesson 1 reaches attribute first,
# and once that is written, _unmasked_pass and objective inside it; lesson 2 then reaches
# _integrated_gradients; lesson 6 drop_mask, then _real_rows inside it; and so on.
# (number, file, function, equation, its lessons, pytest -k selecting them, tip for a comment)
EXERCISES = [
    (1, "model.py", "Layer.forward", "Eq. 1, attention with the padding mask and M_l",
     "test_model.py's reference and attention tests", "reference or padding or rows or one_entry or reach",
     "A goes out times `scale` when one is given (integrated gradients: test_addrop.py\n"
     "lessons 1, 3-5), and before attention dropout (dropout() above), which acts on A @ v only.\n"
     "first_only is only a saving: x may stay (B, T, C), the head reads x[:, 0] either way."),
    (2, "addrop.py", "attribute", "Eq. 5, all selected layers from ONE backward",
     "lessons 1, 2, 11-13", "finite or backward or gold or regression or ablations",
     "runs in eval mode and hands the model back in the mode it came in (lesson 2).\n"
     "ga: one forward (_unmasked_pass), one autograd.grad; iga: _integrated_gradients;\n"
     "aa: the maps of model.encoder(..., depth=max(layers) + 1), no layer above run (lesson 13)."),
    (3, "addrop.py", "_unmasked_pass", "Eq. 4, pseudo labels",
     "lessons 1, 2, 11", "finite or backward or gold", None),
    (4, "addrop.py", "objective", "Eq. 5's F: the pseudo-label logit; -L for regression",
     "lessons 1, 2, 11, 12", "finite or backward or gold or regression", None),
    (5, "addrop.py", "_integrated_gradients", "Eq. 3, integrated gradients",
     "lessons 3-5 (and 2, 11)", "integrated or backward or gold",
     "Layer.forward's `scale` (B, 1, 1, 1) multiplies A. Lesson 5 wants the plain loop's\n"
     "numbers to 1e-10, however ig_budget cuts the m steps into chunks."),
    (6, "addrop.py", "drop_mask", "Eq. 6-7, the mask",
     "lessons 6-9", "by_hand or long_rows or recipe or fraction or stays",
     "draw u as ONE bernoulli((B, H, T, T), q, generator, scores.device), a drop where\n"
     "it is True, so that lesson 7 sees its literal recipe's coin flips; end with _real_rows."),
    (7, "addrop.py", "_real_rows", "Eq. 6-7's edge cases: real pairs only, never a whole row",
     "lessons 6, 7, 9, 13", "by_hand or recipe or stays or ablations", None),
    (8, "addrop.py", "is_addrop_epoch", "Algorithm 1, cross-tuning",
     "lesson 10", "cross_tuning", None),
    (9, "addrop.py", "random_mask", "Table 2's RD, the random baseline",
     "lesson 13", "ablations", None),
    (10, "addrop.py", "pseudo_loss", "Appendix A Eq. 2, the pseudo loss of token tasks",
     "lessons 15-17", "token",
     "a sum, not a mean, over the tokens whose label is not IGNORE (lesson 16 moves the others)."),
]
TESTS = {"model.py": "test_model.py", "addrop.py": "test_addrop.py"}


def message(n, file, name, equation, lessons, k):
    """What the blank body raises: first line for pytest's summary, then how to run its lessons."""
    return (f"Exercise {n} ({equation}): write {name} in exercises/{file}\n"
            f"  checked by {lessons}:\n"
            f"  python -m pytest {TESTS[file]} --impl exercises/{file} -k '{k}'")


def find(tree, qualname):
    """The def node of 'name' or 'Class.name' at the top level of a module."""
    nodes = tree.body
    for part in qualname.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise LookupError(f"no {qualname} in the file: update EXERCISES in exercises/make.py")
        nodes = node.body
    return node


def body_lines(fn):
    """The 0-based line range [start, end) of fn's body after its docstring, and its indent."""
    doc = fn.body[0]
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
        raise ValueError(f"{fn.name} has no docstring: an exercise needs one to say what to write")
    if len(fn.body) < 2 or fn.body[1].lineno <= doc.end_lineno:
        raise ValueError(f"{fn.name}: the body must start on the line after the docstring")
    return doc.end_lineno, fn.end_lineno, " " * doc.col_offset


def stub(exercise, indent):
    """The blank body: the tip as a comment, then the raise."""
    n, file, name, equation, lessons, k, tip = exercise
    text = message(n, file, name, equation, lessons, k)
    assert '"' not in text
    lines = [f"# Exercise {n}: " + tip.replace("\n", "\n#   ")] if tip else []
    lines += ["raise NotImplementedError(", '    "' + text.replace("\n", '\\n"\n    "') + '")']
    return "".join(indent + line + "\n" for part in lines for line in part.split("\n"))


def blank(file, source, numbers=None):
    """source (the text of the real `file`) with the bodies of its exercises, or only of those
    whose number is in `numbers`, replaced by their stubs; the rest of the text as it is."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = [(*body_lines(find(tree, e[2])), e) for e in EXERCISES
             if e[1] == file and (numbers is None or e[0] in numbers)]
    for start, end, indent, e in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start:end] = [stub(e, indent)]
    header = (f"# {file} with the bodies of its exercises blanked, written by exercises/make.py: fill them in and run\n"
              f"#     python -m pytest {TESTS[file]} --impl exercises/{file}\n")
    return header + "".join(lines)


def generate(numbers=None):
    """{file name: text of its exercise file}, from the real files as they are now."""
    return {file: blank(file, (ROOT / file).read_text(), numbers) for file in TESTS}


def answered(path):
    """Numbers of the exercises whose body in the file at `path` is no longer the blank one."""
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:
        return [e[0] for e in EXERCISES if e[1] == path.name]
    done = []
    for e in EXERCISES:
        if e[1] == path.name:
            try:
                body = find(tree, e[2]).body[1:]
            except LookupError:  # an exercise newer than the file: nothing written there yet
                continue
            if not (len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])):
                done.append(e[0])
    return done


if __name__ == "__main__":
    for file, text in generate().items():
        out = HERE / file
        if out.exists() and out.read_text() != text and "--force" not in sys.argv and answered(out):
            sys.exit(f"{out.relative_to(ROOT)} holds answers to exercises {answered(out)}: copy it somewhere "
                     "first, then run python exercises/make.py --force")
        out.write_text(text)
        print(f"wrote {out.relative_to(ROOT)}")

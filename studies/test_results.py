"""
The committed results are what the committed runs say: for each study whose runs are kept in
studies/results/*/finished_runs.tar.gz, unpack them, run its analyses with --tables-only, and compare what they
write with the committed tables, file for file. A table that no longer matches means the report's code changed
(or a result was edited by hand): rebuild it with the same command and commit it with the change.
Needs the GLUE data (the constant answer, dev's labels) and the default weights (the model type); skips without.
"""

import json
import tarfile
from pathlib import Path

import pytest

from support import checkpoint
import data
import experiments

# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

RESULTS = Path(__file__).resolve().parent / "results"

# folder -> its analyses in order (a later one reads an earlier one's JSON), each with the files it writes that are
# compared (an analysis none of whose files is committed yet is not run)
STUDIES = {
    "compare_cpu": [("compare", ["compare.csv", "compare.json", "compare_runs.csv", "compare_epochs.csv"])],
    "confirm": [("ner_pilot", ["ner_pilot.txt", "ner_pilot.json", "ner_pilot.csv"]),
                ("confirm", ["confirm.txt", "confirm.json", "confirm.csv"])],
    "fewshot": [("fewshot_pilot", ["fewshot_pilot.txt", "fewshot_pilot.json", "fewshot_pilot_runs.csv"]),
                ("fewshot", ["fewshot.txt", "fewshot.json", "fewshot.csv", "fewshot_runs.csv"])],
}


@pytest.mark.parametrize("folder", sorted(STUDIES))
def test_tables_only_rebuilds_the_committed_tables(folder, tmp_path, capsys):
    steps = [(analysis, [f for f in files if (RESULTS / folder / f).exists()]) for analysis, files in STUDIES[folder]]
    steps = [(analysis, files) for analysis, files in steps if files]
    assert steps, f"studies/results/{folder}/ holds none of the tables of {[a for a, _ in STUDIES[folder]]}"
    try:
        checkpoint.default_weights_dir()
        glue = data.resolve_data_dir()
        for task in ("SST-2", "RTE", "MRPC"):
            if not (glue / task / "dev.tsv").exists():
                pytest.skip(f"no GLUE {task} dev.tsv in {glue}")
    except checkpoint.WeightsError as e:
        pytest.skip(str(e))
    with tarfile.open(RESULTS / folder / "finished_runs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    for analysis, _ in steps:
        experiments.main([analysis, "--tables-only", "--out", str(tmp_path)])
    capsys.readouterr()
    analyses = " then ".join(a for a, _ in steps)
    for f in (f for _, files in steps for f in files):
        rebuilt = tmp_path / f
        assert rebuilt.exists(), f"{folder}: --tables-only did not write {f}"
        if rebuilt.read_text() != (RESULTS / folder / f).read_text():
            old, new = (RESULTS / folder / f).read_text().splitlines(), rebuilt.read_text().splitlines()
            line = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            pytest.fail(f"studies/results/{folder}/{f} is not what `python studies/experiments.py "
                        f"{analyses} --tables-only` writes from finished_runs.tar.gz: first difference at "
                        f"line {line + 1}:\n  committed: {old[line] if line < len(old) else '(end of file)'}\n"
                        f"  rebuilt:   {new[line] if line < len(new) else '(end of file)'}")


def table_rows(text):
    """The rows of the markdown tables in text, stripped, without their --- lines."""
    return [r for r in (line.strip() for line in text.splitlines())
            if r.startswith("|") and not set(r) <= set("|-: ")]


def committed_tables():
    """Each committed result file (studies/results/**: .txt, .csv, .md, and the strings inside .json) -> its
    table rows."""
    def strings(x):
        if isinstance(x, str):
            yield x
        for v in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()):
            yield from strings(v)
    out = {}
    for f in sorted(RESULTS.rglob("*")):
        if f.suffix in (".txt", ".csv", ".md"):
            out[f] = set(table_rows(f.read_text()))
        elif f.suffix == ".json":
            out[f] = set(table_rows("\n".join(strings(json.loads(f.read_text())))))
    return {f: rows for f, rows in out.items() if rows}


def test_tables_copied_into_results_md_are_the_committed_ones():
    """A table of RESULTS.md copied from a committed result file is copied whole: for each table whose header
    or any row a result file holds verbatim, the result file holding most of its rows must hold every one (a
    table reformatted by hand, header too, is not compared: RESULTS.md has 9 that are copies). Caught:
    the compare_small dev-loss table, two of whose RTE rows were not compare.json's."""
    sources = committed_tables()
    lines = (Path(__file__).resolve().parent.parent / "RESULTS.md").read_text().splitlines()
    tables, rows = [], []
    for i, line in enumerate(lines + [""], 1):
        if line.strip().startswith("|"):
            rows.append((i, line.strip()))
        elif rows:
            tables.append([(i, r) for i, r in rows if not set(r) <= set("|-: ")])
            rows = []
    compared = 0
    for table in (t for t in tables if len(t) > 1):
        body = table[1:]
        best = max(sources, key=lambda f: (sum(r in sources[f] for _, r in body), table[0][1] in sources[f]))
        if table[0][1] in sources[best] or any(r in sources[best] for _, r in body):
            compared += 1
            wrong = [f"line {i}: {r}" for i, r in body if r not in sources[best]]
            assert not wrong, (f"RESULTS.md: a table copied from {best.relative_to(RESULTS.parent.parent)} has rows "
                               "that file does not hold:\n  " + "\n  ".join(wrong))
    assert compared >= 9, f"RESULTS.md: only {compared} tables found in the committed results; expected 9 or more"

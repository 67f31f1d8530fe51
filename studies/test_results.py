"""
The committed results are what the committed runs say: for each study whose runs are kept in
studies/results/*/finished_runs.tar.gz, unpack them, run its analyses with --tables-only, and compare what they
write with the committed tables, file for file. A table that no longer matches means the report's code changed
(or a result was edited by hand): rebuild it with the same command and commit it with the change.
Needs the GLUE data (the constant answer, dev's labels) and the default weights (the model type); skips without.
"""

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

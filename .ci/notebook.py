"""
The tutorial notebook, every cell run in memory from a fresh start (runs/tutorial/, its scratch folder, emptied
first, as a new user has it) (nbclient; CI installs it and ipykernel, development tools only),
then checked against what is committed:
- each "# checks ..." cell, committed without output by design, printed something when run;
- each code cell's committed text output is what its code prints now, every number aside (a machine's digits and
  seconds may differ; a line the code no longer prints, or prints otherwise, is stale);
- the walkthrough model, run afresh, is trained (dev accuracy above 0.75, the committed run's claim).

    python .ci/notebook.py            # check (CI)
    python .ci/notebook.py --write    # run, and write the fresh outputs into tutorial.ipynb (check cells left empty)
"""
import re
import shutil
import sys

import nbclient
import nbformat

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def text(cell):
    """A code cell's printed and returned text (figures, HTML and stderr left out: a library's warnings there
    differ between environments, tqdm's about ipywidgets for one)."""
    return "".join(o.get("text", "") if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
                   for o in cell.outputs if o.output_type == "execute_result" or o.get("name") == "stdout")


def main(write=False):
    committed = nbformat.read("tutorial.ipynb", as_version=4)
    nb = nbformat.read("tutorial.ipynb", as_version=4)
    shutil.rmtree("runs/tutorial", ignore_errors=True)  # a fresh start, as a new user's: the walkthrough model trained
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": "."}}).execute()
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    checks = [i for i in code if nb.cells[i].source.startswith("# checks ")]
    silent = [i for i in checks if not nb.cells[i].outputs]
    assert not silent, f"tutorial.ipynb: the check cells {silent} printed nothing"
    stale = [i for i in code if i not in checks and committed.cells[i].outputs
             and NUMBER.sub("#", text(committed.cells[i])) != NUMBER.sub("#", text(nb.cells[i]))]
    accuracy = re.search(r"the walkthrough model: .* dev accuracy (0\.\d+)", "\n".join(text(nb.cells[i]) for i in code))
    assert accuracy and float(accuracy.group(1)) > 0.75, f"tutorial.ipynb: the walkthrough model, run afresh: {accuracy}"
    if write:
        for i in checks:
            nb.cells[i].outputs, nb.cells[i].execution_count = [], None
        nbformat.write(nb, "tutorial.ipynb")
        print(f"tutorial.ipynb: written, {len(stale)} cells' text changed beyond their numbers: {stale}")
        return
    for i in stale:  # the first line that differs, committed and now
        old, new = (NUMBER.sub("#", text(c)).splitlines() + ["(no more lines)"] for c in (committed.cells[i], nb.cells[i]))
        k = next(k for k, (a, b) in enumerate(zip(old, new)) if a != b)
        print(f"cell {i}, line {k + 1}:\n  committed: {text(committed.cells[i]).splitlines()[k:k + 1]}\n"
              f"  now:       {text(nb.cells[i]).splitlines()[k:k + 1]}")
    assert not stale, (f"tutorial.ipynb: the committed outputs of cells {stale} are not what their code prints now "
                       "(numbers aside): rerun them (python .ci/notebook.py --write) and commit")
    print(f"tutorial.ipynb: all {len(code)} code cells ran without an error, and their committed outputs are current")


if __name__ == "__main__":
    main("--write" in sys.argv[1:])

"""
The tutorial notebook, every cell run in memory from a fresh start (runs/tutorial/, its scratch folder, emptied
first, as a new user has it) (nbclient; CI installs it and ipykernel, development tools only),
then checked against what is committed:
- each "# checks ..." cell printed something when run. A question's check ("# checks Question N") is committed
  with its output, under the question that asks for the prediction, so that a reader who does not run the
  notebook can check it too; an exercise's check ("# checks exercise N") is committed without output, which
  would be the exercise's answer;
- each code cell's committed text output is what its code prints now, every number aside (a machine's digits and
  seconds may differ; a line the code no longer prints, or prints otherwise, is stale);
- except the source listings: the cells that only call `show` or `answer`, which print a function's code as its
  file has it when the cell runs (no line numbers). That code is the core's and changes with it without the
  notebook being wrong, so a listing is compared loosely: it must name the same functions ("# FILE, NAME")
  as it does now. A listing whose code has changed is reported, not failed: --code rewrites the listings alone,
  from the source as it is, in seconds and without running the notebook;
- the walkthrough model, run afresh, is trained (dev accuracy above 0.75, the committed run's claim).

    python .ci/notebook.py            # check (CI)
    python .ci/notebook.py --write    # run, and write the fresh outputs into tutorial.ipynb (exercise checks left
                                      # empty, stderr's warnings left out)
    python .ci/notebook.py --code     # rewrite the source listings' outputs only, from the code as it is now
"""
import ast
import contextlib
import importlib
import io
import re
import shutil
import sys
from html import unescape
from pathlib import Path

import nbformat

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
HEADER = re.compile(r"(?:^|<pre>)# (\S+\.py), ([\w.]+)$", re.M)  # a listing's first line: "# addrop.py, drop_mask"
CODE = "python .ci/notebook.py --code"  # the one command that rewrites the listings


def text(cell):
    """A code cell's printed and returned text (figures, HTML and stderr left out: a library's warnings there
    differ between environments, tqdm's about ipywidgets for one)."""
    return "".join(o.get("text", "") if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
                   for o in cell.outputs if o.output_type == "execute_result" or o.get("name") == "stdout")


def listed(cell):
    """What a listing cell shows: its printed text and its HTML (answer's folded code), unescaped."""
    return "".join(o.get("text", "") if o.output_type == "stream" else unescape(o.get("data", {}).get("text/html", ""))
                   for o in cell.outputs)


def listings(nb):
    """The indices of the source listings: code cells whose every statement is a call of show or answer."""
    found = []
    for i, cell in enumerate(nb.cells):
        try:
            body = ast.parse(cell.source).body if cell.cell_type == "code" else []
        except SyntaxError:  # IPython's magics (%matplotlib): not a listing
            continue
        calls = [s.value.func.id for s in body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                 and isinstance(s.value.func, ast.Name)]
        if body and len(calls) == len(body) and set(calls) <= {"show", "answer"}:
            found.append(i)
    return found


def render(nb):
    """Each listing cell's outputs, {index: outputs}, made by the notebook's own show and answer (its cell that
    defines them, run here) without a kernel: what show prints is the cell's stdout; what answer displays, a
    display_data output as IPython's display writes it (the HTML, and its text/plain stand-in)."""
    root = Path.cwd()
    sys.path.insert(0, str(root))
    from support import cpu
    cpu.fair_share()  # before torch loads
    helper = next(c for c in nb.cells if c.cell_type == "code" and re.search(r"^def listing\(", c.source, re.M))
    ns = {"__name__": "tutorial"}
    exec(helper.source, ns)
    shown = []
    ns["display"] = shown.append  # answer's display: collected here
    out = {}
    for i in listings(nb):
        source = nb.cells[i].source
        for name in set(re.findall(r"\b([A-Za-z_]\w*)\.\w", source)):  # the core's modules the cell names
            if (root / f"{name}.py").is_file():
                ns[name] = importlib.import_module(name)
        printed, shown[:] = io.StringIO(), []
        with contextlib.redirect_stdout(printed):
            exec(source, ns)
        outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed.getvalue())] if printed.getvalue() else []
        outputs += [nbformat.v4.new_output("display_data", data={"text/html": shown_one._repr_html_(),
                                                                 "text/plain": repr(shown_one)}, metadata={})
                    for shown_one in shown]
        out[i] = outputs
    return out


def code():
    """--code: the listings' outputs rewritten from the code as it is now; nothing else in the notebook changes."""
    nb = nbformat.read("tutorial.ipynb", as_version=4)
    fresh = render(nb)
    changed = [i for i, outputs in fresh.items() if listed(nbformat.from_dict({"outputs": outputs})) != listed(nb.cells[i])]
    for i, outputs in fresh.items():
        nb.cells[i].outputs = outputs
    nbformat.write(nb, "tutorial.ipynb")
    print(f"tutorial.ipynb: the {len(fresh)} source listings (cells {sorted(fresh)}) rewritten from the code; "
          f"{len(changed)} changed: {changed}")


def main(write=False):
    committed = nbformat.read("tutorial.ipynb", as_version=4)
    nb = nbformat.read("tutorial.ipynb", as_version=4)
    shutil.rmtree("runs/tutorial", ignore_errors=True)  # a fresh start, as a new user's: the walkthrough model trained
    import nbclient  # here: --code needs no kernel
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": "."}}).execute()
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    checks = [i for i in code_cells if nb.cells[i].source.startswith("# checks ")]
    quiet = [i for i in checks if not nb.cells[i].source.startswith("# checks Question ")]  # an exercise's answer
    silent = [i for i in checks if not nb.cells[i].outputs]
    assert not silent, f"tutorial.ipynb: the check cells {silent} printed nothing"
    shown = listings(nb)
    misnamed = [i for i in shown if not HEADER.findall(listed(nb.cells[i]))
                or HEADER.findall(listed(committed.cells[i])) != HEADER.findall(listed(nb.cells[i]))]
    moved = [i for i in shown if i not in misnamed and listed(committed.cells[i]) != listed(nb.cells[i])]
    stale = [i for i in code_cells if i not in quiet and i not in shown and committed.cells[i].outputs
             and NUMBER.sub("#", text(committed.cells[i])) != NUMBER.sub("#", text(nb.cells[i]))]
    accuracy = re.search(r"the walkthrough model: .* dev accuracy (0\.\d+)",
                         "\n".join(text(nb.cells[i]) for i in code_cells))
    assert accuracy and float(accuracy.group(1)) > 0.75, f"tutorial.ipynb: the walkthrough model, run afresh: {accuracy}"
    if write:
        for i in quiet:
            nb.cells[i].outputs, nb.cells[i].execution_count = [], None
        for i in code_cells:  # stderr left out: libraries' warnings, which differ between environments and name
            nb.cells[i].outputs = [o for o in nb.cells[i].outputs  # the machine's folders (tqdm's, on gradio's import)
                                   if not (o.output_type == "stream" and o.get("name") == "stderr")]
        nbformat.write(nb, "tutorial.ipynb")
        print(f"tutorial.ipynb: written, {len(stale)} cells' text changed beyond their numbers: {stale}; "
              f"source listings changed: {misnamed + moved}")
        return
    for i in stale:  # the first line that differs, committed and now
        old, new = (NUMBER.sub("#", text(c)).splitlines() + ["(no more lines)"] for c in (committed.cells[i], nb.cells[i]))
        k = next(k for k, (a, b) in enumerate(zip(old, new)) if a != b)
        print(f"cell {i}, line {k + 1}:\n  committed: {text(committed.cells[i]).splitlines()[k:k + 1]}\n"
              f"  now:       {text(nb.cells[i]).splitlines()[k:k + 1]}")
    if moved:
        print(f"note: the source listings of cells {moved} show code that has changed since they were written "
              f"(not a failure: {CODE} rewrites them)")
    assert not misnamed, (f"tutorial.ipynb: the source listings of cells {misnamed} do not name the functions "
                          f"their code lists now: {CODE} rewrites them from the code, in seconds; commit that")
    assert not stale, (f"tutorial.ipynb: the committed outputs of cells {stale} are not what their code prints now "
                       "(numbers aside): rerun them (python .ci/notebook.py --write) and commit")
    print(f"tutorial.ipynb: all {len(code_cells)} code cells ran without an error, and their committed outputs are current")


if __name__ == "__main__":
    if "--code" in sys.argv[1:]:
        code()
    else:
        main("--write" in sys.argv[1:])

"""
The layout stays readable at a glance: at most 15 tracked files at the top level; the core's two longest files
(train.py, data.py) at most 500 lines; no function of the core or of support/ over 66 lines (a screen); and the
README's Files section is the map of the top level, one line a file or folder, each link to a path that exists.
"""

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ["model.py", "addrop.py", "train.py", "data.py", "impl.py", *sorted(str(p.relative_to(ROOT)) for p in
                                                                   (ROOT / "support").glob("*.py"))]
# at the top by convention, named in the README's text rather than its map
CONVENTION = {".gitignore", "README.md", "RESULTS.md", "requirements.txt", "pytest.ini"}


def tracked_top():
    """The top level as git tracks it: (files, folders)."""
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return {n for n in names if "/" not in n}, {n.split("/")[0] for n in names if "/" in n} - {".ci"}


def test_top_level_holds_at_most_15_files():
    files, _ = tracked_top()
    assert len(files) <= 15, f"{len(files)} tracked files at the top level (at most 15): {sorted(files)}"


@pytest.mark.parametrize("name", ["train.py", "data.py"])
def test_core_files_at_most_500_lines(name):
    lines = len((ROOT / name).read_text().splitlines())
    assert lines <= 500, f"{name} has {lines} lines (at most 500): move what only a study needs out of its path"


@pytest.mark.parametrize("name", CORE)
def test_no_function_over_a_screen(name):
    tree = ast.parse((ROOT / name).read_text())
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 66]
    assert not long, f"{name}: functions over 66 lines, split them into named steps: {long}"


def test_readme_files_section_maps_the_top_level():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Files\n\n(.*?)\n\n", readme, re.S | re.M)
    assert section, "README.md has no '## Files' section"
    lines = section[1].splitlines()
    assert all(line.startswith("- [") for line in lines), f"one line a file or folder, each '- [name](link): ...': {lines}"
    links = [link for line in lines for link in re.findall(r"\]\(([^)]+)\)", line.split(": ", 1)[0])]
    assert all((ROOT / link).exists() for link in links), [link for link in links if not (ROOT / link).exists()]
    named = {link.split("/")[0] + ("" if "/" not in link else "/") for link in links}
    files, folders = tracked_top()
    missing = sorted(files - CONVENTION - named) + sorted(f"{d}/" for d in folders if f"{d}/" not in named)
    assert not missing, f"README's Files section does not name {missing}"

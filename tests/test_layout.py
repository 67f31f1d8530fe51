"""
The README's Files section is the map of the top level, one line a file or folder, each link to a path that
exists: a reader finds every file there.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# at the top by convention, named in the README's text rather than its map
CONVENTION = {".gitignore", "README.md", "RESULTS.md", "requirements.txt", "pytest.ini"}


def tracked_top():
    """The top level as git tracks it: (files, folders)."""
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return {n for n in names if "/" not in n}, {n.split("/")[0] for n in names if "/" in n} - {".ci"}


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

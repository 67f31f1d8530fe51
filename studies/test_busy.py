"""
Tests of busy.py: its busy processes stop by themselves (after their time, or when the script that started
them is gone), and the whole benchmark, run as a user runs it with the smallest options on a tiny model,
times every option under every load and leaves no process behind.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import busy
import test_cli

# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def gone(pid, within):
    """Whether process pid has ended (or is a zombie waiting for its parent) within `within` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in "ZX":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_busy_process_stops_by_itself():
    """A busy process ends after its time, and at once when its parent dies, so that a benchmark killed
    midway leaves no process spinning on the user's cores."""
    p = busy.start_busy(1, 0.3)[0]
    assert p.wait(timeout=10) == 0
    # a parent that starts one busy process for 10 minutes, prints its pid and dies
    parent = subprocess.run([sys.executable, "-c", "import busy, sys; print(busy.start_busy(1, 600)[0].pid)"],
                            cwd=Path(busy.__file__).parent, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert parent.returncode == 0, parent.stderr
    assert gone(int(parent.stdout), within=5)


def test_the_script_times_every_option_under_every_load(tmp_path):
    """`python studies/busy.py` with one round of one step on a tiny model (test_cli.py's 8 RTE rows) exits 0
    and writes, for each option and each count of busy processes, one positive, finite ms per step; the
    `threads=1` worker ran with one thread; the default's worker, started afresh beside one busy process
    (a whole CPU taken), chose to wait passively (cpu.fair_share); none of its processes outlives it."""
    test_cli.write_good(tmp_path)
    out = tmp_path / "busy.json"
    cmd = [sys.executable, "studies/busy.py", "--options", "default,torch,passive,threads=1,spin=0", "--busy", "0,1",
           "--rounds", "1", "--steps", "1", "--task", "rte", "--limit", "8", "--max-len", "16", "--weights", str(tmp_path / "w"),
           "--data-dir", str(tmp_path / "glue"), "--json", str(out)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["ms"]) == {"default", "torch", "passive", "threads=1", "spin=0"}
    assert all(len(v) == 1 and 0 < v[0] < math.inf for row in result["ms"].values() for v in row.values())
    assert all(set(row) == {"0", "1"} for row in result["ms"].values())
    assert result["threads"]["threads=1"] == 1
    assert result["default_chose"]["1"] == ["passive"], result["default_chose"]
    assert "the default chose: " in r.stdout
    assert "| default (" in r.stdout and "1 busy / 0 busy" in r.stdout
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftover == [], leftover

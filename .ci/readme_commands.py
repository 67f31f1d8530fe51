"""
Run every command that README.md shows, in a smoke form, so that no README command can rot: each `python` or
`torchrun` line of a code block is run with flags appended that shrink it (a few dozen examples, two epochs,
short sequences, its own output folder); later flags win in argparse, so the command's own flags stay as
written. Commands that need a GPU or weights a CPU machine does not have are listed as skipped, by name.

    python .ci/readme_commands.py            # from the repository root, with $GLUE_DIR set
"""

import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN_SMOKE = ["--limit", "48", "--dev-limit", "32", "--epochs", "2", "--max-len", "32", "--threads", "1"]
NEEDS = {"--weights roberta-base": "roberta-base weights and a GPU", "--weights electra-base": "electra-base weights",
         "--nproc_per_node=8": "8 GPUs"}
NOT_RUN_HERE = ("python -m venv", "python -m pytest -q",  # CI made the venv and runs the suite itself
                "python -m explorer")  # a server that runs until stopped: .ci/run's browser test starts it


def commands(readme):
    """Every python/torchrun line inside a ``` block of the README, its comment cut off."""
    out, inside = [], False
    for line in readme.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and re.match(r"(python|torchrun) ", line):
            out.append(line.split("  #")[0].split(" #")[0].strip())
    return out


def smoke(cmd, tmp, i):
    """(argv to run, what must hold) for one README command, or (None, why it is skipped). What must hold: exit 0,
    and where it says so, a file written or a word printed; "Exercise": a non-zero exit with that word printed."""
    for key, why in NEEDS.items():
        if key in cmd:
            return None, f"needs {why}"
    if cmd.startswith(NOT_RUN_HERE):
        return None, "run by .ci/run itself"
    argv = shlex.split(cmd)
    if "--impl" in argv and "train.py" in argv:  # the capstone on the blank files: it stops at the first exercise
        return argv + TRAIN_SMOKE + ["--out", str(tmp / f"run{i}")], "Exercise"
    if "--impl" in argv:  # an exercise file: its lessons must fail, each with only its exercise's message
        return argv + [f for f in ("-q", "-x") if f not in argv], "Exercise"
    if "train.py" in argv and "--help" not in argv:
        out = tmp / ("resume" if "--save-every" in argv or "--resume" in argv else f"run{i}")
        extra = ["--epochs", "1"] if "--save-every" in argv else []  # the resume pair: the second adds epoch 2
        return argv + TRAIN_SMOKE + extra + ["--out", str(out)], "resuming after" if "--resume" in argv else 0
    if argv[1:2] == ["studies/experiments.py"]:
        return argv + ["--limit", "32", "--max-len", "32", "--epochs", "1", "--threads", "1",
                       "--out", str(tmp / f"study{i}")], 0
    if argv[1:2] == ["studies/bench.py"]:
        return argv + ["--steps", "2", "--warmup", "1", "--skip-iga", "--json", str(tmp / "bench.json")], tmp / "bench.json"
    return argv, 0


def passed(r, expect):
    if expect == "Exercise":
        return r.returncode != 0 and "Exercise" in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr
    if isinstance(expect, str):
        return r.returncode == 0 and expect in r.stdout
    return r.returncode == 0 and (expect == 0 or Path(expect).is_file())


def main():
    cmds = commands(ROOT / "README.md")
    assert len(cmds) >= 10, f"README.md shows only {len(cmds)} commands: did its code blocks change?"
    failed, ran, skipped = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, cmd in enumerate(cmds):
            argv, expect = smoke(cmd, Path(tmp), i)
            if argv is None:
                print(f"-- skipped ({expect}): {cmd}", flush=True)
                skipped += 1
                continue
            print(f"-- {shlex.join(argv)}", flush=True)
            r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            ok = passed(r, expect)
            ran += 1
            if not ok:
                failed.append(cmd)
                print(f"   FAILED (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}", flush=True)
            else:
                print(f"   ok: {(r.stdout.strip().splitlines() or [''])[-1][:150]}", flush=True)
    print(f"README commands: {ran} run, {skipped} skipped, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

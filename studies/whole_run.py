"""
What --compile costs and pays over a whole run: the README's RTE command (or any train.py flags) run to the end
three ways, one after another, in fresh processes: eager; compiled with an empty compile cache (cold, as a new
user's first run); compiled again with the cache the cold run left (warm, every later run). Each line gives the
wall time to the end, train.py's own seconds, the seconds its first passes took to compile (compile_seconds in
metrics.json) and how many recompiles torch logged after the first AD-DROP step (TORCH_LOGS=recompiles; each kind
of pass compiles at its first run, and none should after). bench.py --whole-run runs it; alone:

    python studies/whole_run.py                                   # the README's RTE command, MiniLM, 3 epochs
    python studies/whole_run.py -- --task rte --p 0.7 --q 0.1 --limit 64 --epochs 2   # flags after --
    python studies/whole_run.py --backend aot_eager -- --limit 64  # any torch.compile backend (a CPU check)

A run costs what train.py costs: minutes on a GPU, far more on a CPU (where --compile does not pay: the numbers
are then only the check that the three ways run and agree).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_RTE = ["--task", "rte", "--p", "0.7", "--q", "0.1"]


def one_run(flags, out, env):
    """train.py with flags into out, in a fresh process; (wall seconds, metrics.json, recompiles logged after the
    first AD-DROP step ended: each kind of pass compiles at its first run, and none should after)."""
    cmd = [sys.executable, str(ROOT / "train.py"), *flags, "--out", str(out), "--log-interval", "100000"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)  # one stream: order
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}")
    lines = r.stdout.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("compiled: the first AD-DROP step")), len(lines))
    return wall, json.loads((out / "metrics.json").read_text()), sum("Recompiling function" in x for x in lines[first:])


def whole_runs(flags, backend="inductor"):
    """The three runs, in order: [(name, wall seconds, metrics, recompiles)]."""
    work = Path(tempfile.mkdtemp(prefix="whole_run_"))
    cache = work / "inductor-cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    compiled_env = {**env, "TORCH_LOGS": "recompiles"}
    rows = []
    try:
        ways = (("eager", [], env), ("compiled, cold cache", ["--compile", backend], compiled_env),
                ("compiled, warm cache", ["--compile", backend], compiled_env))
        for i, (name, extra, run_env) in enumerate(ways):
            rows.append((name, *one_run([*flags, *extra], work / f"run{i}", run_env)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def report(rows):
    """One line a run, each against the eager one: the figures the README quotes."""
    eager = rows[0][1]
    lines = []
    for name, wall, m, recompiles in rows:
        compiling = sum(m.get("compile_seconds", {}).values())
        lines.append(f"{name:<22} {wall:7.1f} s to the end ({wall / eager:.2f}x eager) | train.py {m['seconds']:.1f} s"
                     f" | first passes {compiling:.1f} s | recompiles after them {recompiles} | dev {m['dev_at_best']:.4f}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="inductor", help="torch.compile's backend for the compiled runs")
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    flags = flags if any(f == "--task" for f in flags) else README_RTE + flags
    print("train.py " + " ".join(flags), flush=True)
    print(report(whole_runs(flags, args.backend)))


if __name__ == "__main__":
    main()

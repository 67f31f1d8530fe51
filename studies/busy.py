"""
What a training step costs when other programs share the CPU: ms per AD-DROP step with 0, 1, 2, 3 processes
spinning `while True: pass` beside the run, for each way of choosing torch's threads and OpenMP's waiting.

    python studies/busy.py                                  # 480 SST-2 sentences, MiniLM, batch 16, ~10 min
    python studies/busy.py --options default,spin=1000,spin=100000 --rounds 5

Each option is one worker process, started with its own environment (OpenMP reads it once, when torch
loads) and set up as train.py sets up a run: --task sst2 --limit 480 --p 0.6 --q 0.8 (GA, cross-tuning's
AD-DROP epoch), batch 16. The options, measured in rounds: in each round, for each count of busy processes,
those start, then every worker in turn (the order rotates from round to round) times --steps steps of
the same batches, then the busy processes stop. So every cell of the table saw the same load, interleaved
with the others; a cell gives the median over the rounds and [the lowest, the highest]. The busy processes
stop by themselves after --busy-seconds, or as soon as this script is gone (their parent changes).
The default's worker chooses by the load when it starts, as train.py does; so it is started afresh in each cell,
after the busy processes, and the table says what it chose.

    default     what train.py does: cpu.fair_share() (passive waiting if other programs keep more than
                cpu.BUSY CPUs busy at start, else a short OpenMP spin, cpu.SPINCOUNT), torch's threads
    torch       torch's own defaults: its threads, OpenMP's default waiting (spin ~300,000 turns)
    passive     OMP_WAIT_POLICY=PASSIVE: a waiting thread sleeps at once
    threads=N   torch.set_num_threads(N), OpenMP's default waiting
    spin=N      GOMP_SPINCOUNT=N

Any OMP_WAIT_POLICY or GOMP_SPINCOUNT of this shell is left out of the workers' environment: each row is what
its name says.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from support import cpu  # noqa: E402  (no torch here: the parent never imports it, only the workers do)

OPTIONS = ("default", "torch", "passive", "threads=1")
# a busy process: spins until its time is up or its parent is gone (then it is re-parented)
BUSY = """import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(100000):
        pass
"""


def option_env(name):
    """The environment and --threads of one option (see the docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    threads = None
    if name == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    elif name.startswith("spin="):
        env["GOMP_SPINCOUNT"] = str(int(name[5:]))
    elif name.startswith("threads="):
        threads = int(name[8:])
    elif name not in ("default", "torch"):
        raise ValueError(f"--options: unknown option {name!r}: default, torch, passive, threads=N or spin=N")
    return env, threads


# -----------------------------------------------------------------------------
# the worker: one option, set up once, then timing steps on request

def worker(name, train_flags):
    """Set up like train.py (after cpu.fair_share() for `default` only), warm up, then answer each line
    'FIRST K' on stdin with the ms per step of K AD-DROP steps on batches FIRST, FIRST+1, ... of the epoch."""
    if name == "default":
        cpu.fair_share()
    import torch  # after the environment is final
    import data
    from support import settings
    import train
    _, threads = option_env(name)
    with tempfile.TemporaryDirectory() as out, open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        args = settings.parse_args(train_flags + ["--out", out, "--no-checkpoint"] +
                                   (["--threads", str(threads)] if threads else []))
        j = train.setup(args)  # its line about the run would be read as the answer
    split = j.splits["train"]
    batches = [train.to_device(b, j.device) for b in
               data.batches(split.enc, split.y, j.batch_size, j.pad_id, shuffle=True, seed=args.seed, epoch=2)]
    for b in batches[:2]:  # warm-up
        train.train_step(j, b, adrop=True)
    chose = "passive" if os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE" else "spin"
    print(f"ready {torch.get_num_threads()} {chose}", flush=True)
    for line in sys.stdin:
        first, k = map(int, line.split())
        t = time.perf_counter()
        for i in range(first, first + k):
            train.train_step(j, batches[i % len(batches)], adrop=True)
        print(f"{(time.perf_counter() - t) * 1000 / k:.1f}", flush=True)

# -----------------------------------------------------------------------------
# the parent: busy processes, rounds, the table


def start_busy(n, seconds):
    return [subprocess.Popen([sys.executable, "-c", BUSY, str(seconds), str(os.getpid())]) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def start_worker(name, train_flags):
    env, _ = option_env(name)
    return subprocess.Popen([sys.executable, __file__, "--worker", name, "--", *train_flags],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def ready(name, w):
    """Wait for a worker's 'ready THREADS CHOICE' line; returns (threads, choice)."""
    line = w.stdout.readline().split()
    if not line or line[0] != "ready":
        sys.exit(f"error: the worker of option {name} failed to start (its error is above)")
    return int(line[1]), line[2]


def measure(args, train_flags):
    """ms per step: {option: {busy count: [one figure per round]}}, each worker's thread count, and what the
    default chose in each cell: {busy count: [choice per round]}."""
    fresh = [name for name in args.options if name == "default"]  # chooses by the load at its start
    workers, threads, chose = {}, {}, {n: [] for n in args.busy}
    try:
        for name in args.options:
            if name not in fresh:
                workers[name] = start_worker(name, train_flags)
        for name, w in workers.items():
            threads[name] = ready(name, w)[0]
        ms = {name: {n: [] for n in args.busy} for name in args.options}
        for r in range(args.rounds):
            for n in args.busy:
                procs = start_busy(n, args.busy_seconds)
                try:
                    time.sleep(0.5 if n else 0)  # let them take the cores
                    for name in fresh:  # a run started on the machine as it is now
                        workers[name] = start_worker(name, train_flags)
                        threads[name], choice = ready(name, workers[name])
                        chose[n].append(choice)
                    names = args.options[(r + n) % len(args.options):] + args.options[:(r + n) % len(args.options)]
                    for name in names:
                        workers[name].stdin.write(f"{r * args.steps} {args.steps}\n")
                        workers[name].stdin.flush()
                        ms[name][n].append(float(workers[name].stdout.readline()))
                finally:
                    stop(procs)
                    stop([workers.pop(name) for name in fresh if name in workers])
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        return ms, threads, chose
    finally:
        stop(workers.values())


def table(ms, threads, busy):
    """The markdown table: per option and busy count, the median ms per step [lowest-highest over rounds],
    and the median with the most busy processes over the idle one."""
    lines = ["| option (threads) | " + " | ".join(f"{n} busy" for n in busy) + f" | {busy[-1]} busy / {busy[0]} busy |",
             "|---" * (len(busy) + 2) + "|"]
    for name, row in ms.items():
        med = {n: statistics.median(v) for n, v in row.items()}
        cells = [f"{med[n]:.0f} [{min(v):.0f}-{max(v):.0f}]" for n, v in row.items()]
        lines.append(f"| {name} ({threads[name]}) | " + " | ".join(cells) + f" | {med[busy[-1]] / med[busy[0]]:.2f}x |")
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--options", default=",".join(OPTIONS), help=f"comma-separated (default: {','.join(OPTIONS)})")
    ap.add_argument("--busy", default="0,1,2,3", help="counts of busy processes, the table's columns")
    ap.add_argument("--rounds", type=int, default=3, help="each cell's figure is the median over these")
    ap.add_argument("--steps", type=int, default=4, help="timed AD-DROP steps per cell")
    ap.add_argument("--busy-seconds", type=float, default=1800, help="a busy process stops after this, whatever happens")
    ap.add_argument("--task", default="sst2")
    ap.add_argument("--limit", type=int, default=480, help="training sentences")
    ap.add_argument("--weights", default=None, help="as train.py's (default: all-MiniLM-L6-v2)")
    ap.add_argument("--data-dir", default=None, help="as train.py's")
    ap.add_argument("--max-len", default=None, help="as train.py's (default: Table 4's)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # internal: run one option's worker
    ap.add_argument("train_flags", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.options, args.busy = args.options.split(","), [int(n) for n in args.busy.split(",")]
    for name in args.options:
        try:
            option_env(name)
        except ValueError as e:
            ap.error(str(e))
    if args.rounds < 1 or args.steps < 1 or min(args.busy) < 0:
        ap.error("--rounds and --steps must be at least 1, --busy counts at least 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker, args.train_flags)
    flags = ["--task", args.task, "--limit", str(args.limit), "--p", "0.6", "--q", "0.8", "--batch-size", "16",
             "--dev-limit", "8", "--epochs", "2"] + (["--weights", args.weights] if args.weights else []) + \
            (["--data-dir", args.data_dir] if args.data_dir else []) + \
            (["--max-len", args.max_len] if args.max_len else [])
    t0 = time.time()
    ms, threads, chose = measure(args, flags)
    wall = time.time() - t0
    print(f"ms per AD-DROP step (GA, p 0.6, q 0.8), {args.task} --limit {args.limit}, batch 16, "
          f"{len(os.sched_getaffinity(0))} CPUs; median [lowest-highest] of {args.rounds} rounds of {args.steps} "
          f"steps; {wall:.0f} s wall")
    print(table(ms, threads, args.busy))
    if "default" in args.options:
        print("the default chose: " + "; ".join(f"{n} busy: " + ", ".join(f"{c} {v.count(c)}x" for c in sorted(set(v)))
                                              for n, v in chose.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"ms": ms, "threads": threads, "default_chose": chose, "wall_s": wall,
                                               "spincount": cpu.SPINCOUNT, "argv": sys.argv[1:]}, indent=1))


if __name__ == "__main__":
    main()

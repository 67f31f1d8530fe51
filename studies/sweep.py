"""
The sweep runner of the studies: an analysis is a list of runs (Run: a folder name, train.py's flags, where its
result goes in the tables), each one train.run() call into its own folder. A run that finished with the same
settings is read back, not trained again; --shard K/N trains a disjoint slice of the list; the tables and
figures are always written from every finished run on disk, whole, even when shards finish together.
"""

import csv
import json
import math
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from support import checkpoint
from support import settings
from support import state
import train

# these args may differ between a finished run and its rerun without making the result stale
IRRELEVANT = ("out", "data_dir", "device", "log_interval", "no_checkpoint", "threads", "resume")


class Run(NamedTuple):
    name: str   # its folder under the analysis's output folder
    argv: list  # train.py flags
    info: dict  # where its result goes in the tables: method, seed, p, q, ...

# -----------------------------------------------------------------------------
# an analysis's settings: the command line over the preset of --scale (args.preset, set by parse_args)

def tasks(args, analysis):
    preset = args.preset[analysis]
    return args.tasks or list(preset.get("tasks") or [preset["task"]])


def setting(args, analysis, key, task=None):
    """A command-line value for this task alone (args.task_flags: confirm's --ner-seeds), else one for every task,
    where one was given; else the task's value in the preset of --scale, else the analysis's."""
    v = getattr(args, "task_flags", {}).get(task, {}).get(key)
    if v is None:
        v = getattr(args, key, None)
    if v is not None:
        return v
    preset = args.preset[analysis]
    return preset.get("tasks", {}).get(task, {}).get(key, preset.get(key))


def seeds_of(args, analysis, task=None):
    """The seeds an analysis repeats its settings over: --seeds of them from --first-seed on (default: the
    preset's first_seed, else 0)."""
    first = setting(args, analysis, "first_seed", task) or 0
    return range(first, first + setting(args, analysis, "seeds", task))


def seed_range(seeds):
    """How the tables name the seeds they used: 'seeds 100-123', or 'seed 7' for one."""
    seeds = sorted(seeds)
    if not seeds:
        return "no seeds"
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def train_flags(args, analysis, task, **extra):
    """The train.py flags of one run: the analysis's settings for this task, then run-specific ones."""
    flags = {k: setting(args, analysis, k, task) for k in
             ("epochs", "limit", "limit_first", "max_len", "lr", "batch_size", "holdout", "patience", "dtype",
              "group_by_length", "predict")}
    flags.update(task=task, dev_limit=setting(args, analysis, "dev_limit", task) or None, threads=args.threads,
                 weights=args.weights or args.preset["weights"], data_dir=args.data_dir,
                 device=args.device, no_checkpoint=True)
    flags.update(extra)
    argv = []
    for k, v in flags.items():
        if v is True:
            argv.append("--" + k.replace("_", "-"))
        elif v is not None and v is not False:
            argv += ["--" + k.replace("_", "-"), str(v)]
    return argv


def output_base(args, analysis):
    """OUT/ANALYSIS_TASK: the runs go in this folder, the figures and tables next to it with its name."""
    return Path(args.out) / f"{analysis}_{tasks(args, analysis)[0]}"


def model_config(args, folder=None):
    """The config of --weights (or the preset's), or of a --checkpoint folder."""
    flag, folder = ("--checkpoint", Path(folder)) if folder else \
        ("--weights", checkpoint.resolve_weights(args.weights or args.preset["weights"]))
    if not (folder / "config.json").is_file():
        raise checkpoint.WeightsError(f"{flag} {folder}: {folder / 'config.json'} does not exist; see weights/README.md")
    return checkpoint.read_config(folder / "config.json")


def table4_pq(args, task):
    """Table 4's p and q for the task and the model type (bert or roberta), unless --p/--q say otherwise."""
    t4 = settings.SETTINGS[task][model_config(args).model_type]
    return (args.p if args.p is not None else t4["p"]), (args.q if args.q is not None else t4["q"])

# -----------------------------------------------------------------------------
# one run, read back or trained; a sweep of runs, sharded

def train_args(run_dir, argv, resume=False):
    return settings.parse_args(argv + ["--out", str(run_dir), "--log-interval", "1000000"] + ["--resume"] * resume)


def same_settings(old_args, targs):
    # a flag that train.py gained after the run was written counts as unchanged
    return all(old_args.get(k, v) == v for k, v in vars(targs).items() if k not in IRRELEVANT)


def read_back(run_dir, targs):
    """The result of the run in run_dir if it finished with targs's settings, or failed with them; else None."""
    for name in ("metrics.json", "failed.json"):
        f = Path(run_dir) / name
        if f.exists():
            old = json.loads(f.read_text())
            if same_settings(old["args"], targs) and (name == "failed.json" or old.get("finished")):
                return old
    return None


def run_once(run_dir, argv, label):
    """One training run into run_dir, or its result read back if it already finished with the same settings.
    A run stopped after an epoch continues from its train_state.pt (--resume), unless its metrics.json says
    it was made with other settings: then it starts again. A run that diverges (train.py exits on a
    non-finite loss) returns {"error": ...} and is not retried on a rerun. A run that another live process
    holds (its run.lock) is left to it: None, and the sweep goes on, so more processes can share a shard."""
    run_dir = Path(run_dir)
    targs = train_args(run_dir, argv)
    if (res := read_back(run_dir, targs)) is not None:
        print(f"  {label}: done before, read back from {run_dir}")
        return res
    # train.py writes the state, then metrics.json, after each epoch: metrics.json says whose state it is
    metrics = run_dir / "metrics.json"
    stale = metrics.exists() and not same_settings(json.loads(metrics.read_text())["args"], targs) \
        and not state.saved_after_metrics(run_dir)  # a state newer than metrics.json is a later run's
    resume = (run_dir / state.STATE).exists() and not stale
    if stale:  # its state is another run's: removed, as train.py refuses to overwrite an unfinished run's state
        print(f"  {label}: settings changed since {metrics} was written; training again")
        (run_dir / state.STATE).unlink(missing_ok=True)
    print(f"  {label}: {'resuming' if resume else 'training'} ({' '.join(argv)})", flush=True)
    try:
        return train.run(train_args(run_dir, argv, resume))
    except train.Diverged as e:  # any other exit is a setup error, which would stop every run: it stops the sweep
        failed = {"args": vars(targs), "error": str(e.code), "best_metric": float("nan"), "history": []}
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "failed.json", failed)
        print(f"  {label}: FAILED: {e.code}")
        return failed
    except state.Busy:  # another process of the sweep is training it: so several processes can share one shard
        print(f"  {label}: another process is training it; skipped", flush=True)
        return None
    except SystemExit:  # --resume of a run that another process finished while this one set up: read it back
        if (res := read_back(run_dir, targs)) is None:
            raise
        return res


def shard_of(runs, shard):
    """Shard K of N (K from 1): the runs dealt to seat K when the list, shuffled with seed 0, is dealt
    round-robin to N seats; kept in list order. Over K = 1..N the shards are a disjoint cover of runs."""
    if shard is None:
        return list(runs)
    k, n = shard
    order = np.random.default_rng(0).permutation(len(runs))
    return [runs[i] for i in sorted(order[k - 1::n].tolist())]


def sweep(args, analysis, base, runs, report):
    """Train this process's shard of runs, then build the tables and figures from every finished run on disk."""
    mine = [] if args.tables_only else shard_of(runs, args.shard)
    if args.shard and not args.tables_only:
        print(f"  shard {args.shard[0]}/{args.shard[1]}: {len(mine)} of the {len(runs)} runs")
    with state.StopSignals() as stop:  # SIGTERM or SIGUSR1 between runs: stop before the next one
        for i, r in enumerate(mine, 1):
            if stop.signum is not None:
                raise state.Stopped(f"stopped by {stop.signum.name} between runs")
            run_once(base / r.name, r.argv, f"[{i}/{len(mine)}] {r.name}")  # inside one, train.run stops it
    results = [read_back(base / r.name, train_args(base / r.name, r.argv)) for r in runs]
    missing = sum(res is None for res in results)
    if missing:
        print(f"{analysis}: {missing} of {len(runs)} runs not finished yet (other shards, or stopped); "
              f"the tables below are from the {len(runs) - missing} finished ones")
    report(args, base, runs, results)

# -----------------------------------------------------------------------------
# tables and figures, written whole even when shards finish at the same time

def atomic_write(path, write):
    """checkpoint.atomic_write with a temporary file of its own. Shards finishing together write the same
    tables; a unique name (mkstemp), on one machine or several over a shared folder, keeps one from renaming
    the other's half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    checkpoint.atomic_write(path, write, tmp=tmp)


def write_csv(path, rows):
    """Rows (a list of dicts) to CSV, a column per key of any row; nothing is written without rows."""
    def write(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
            w.writeheader()
            w.writerows(rows)
    if rows:
        atomic_write(path, write)


def write_json(path, obj):
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(obj, indent=2)))


def plt_figure(*a, **kw):
    import matplotlib
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt
    return plt, *plt.subplots(*a, **kw)


def save_figure(fig, path, **kw):
    import matplotlib.pyplot as plt
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", **kw))
    plt.close(fig)


def fmt(x, scale=100):
    return "nan" if x is None or not math.isfinite(x) else f"{scale * x:.1f}"


def mean_std(values):
    """Mean and sample std (n - 1) of the finite values; nan where there are too few."""
    s = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    return (float(s.mean()) if len(s) else math.nan), (float(s.std(ddof=1)) if len(s) > 1 else math.nan)

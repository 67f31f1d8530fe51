"""
The paper's analyses in miniature, with plots, and the comparison a reviewer would ask for. Every training
run is one train.run() call.

    python experiments.py prior   --data-dir ../shared/glue   # Sec. 2.2, Fig. 2: loss curves of four drop strategies
    python experiments.py grid    --data-dir ../shared/glue   # Fig. 6 p/q heatmap and Fig. 4 cross-tuning ablation
    python experiments.py seeds   --data-dir ../shared/glue   # Tables 3 and 5: mean +- std over seeds, few-shot
    python experiments.py figure1 --data-dir ../shared/glue   # Fig. 1: A, B and the dropped positions of one head
    python experiments.py all     --data-dir ../shared/glue   # the four commands above, one after another
    python experiments.py compare --data-dir ../shared/glue   # does AD-DROP help? paired seeds, dev only reported
    python experiments.py compare_small --data-dir ../shared/glue   # the README's first compare (issue 17: too small)

What the cpu presets run, and their wall time on 2 CPU cores shared with other jobs (--threads 1):
    prior    MRPC, 240 training examples, 5 epochs, 4 runs                                 14 min
    grid     SST-2, 160 examples, 3 epochs, 3x3 grid with and without cross-tuning, 19 runs  17 min
    seeds    SST-2, 16- and 64-shot, 3 seeds, fine-tuning and AD-DROP, 12 runs              15 min
    figure1  SST-2, a model fine-tuned on 192 examples for 2 epochs, then one example       1 min
    compare  SST-2 and MRPC, 1000 training examples each (200 of them held out), up to 10 epochs
             (patience 3), full dev sets, MRPC also on PAWS-Wiki test; 8 seeds x 5 arms, 80 runs;
             two --threads 1 shards side by side                    estimated 5.6-6.4 h (8.3 h at most)
    compare_small  SST-2, STS-B, RTE: the first 200 of each (50 held out), 4 epochs, the first 200
             dev examples, 5 seeds x 4 arms, 60 runs; two shards                          31 min
(the times of prior, grid, seeds and figure1 were measured when --limit took the first N examples; it now
draws a stratified sample with the seed.)

--scale cpu (the default) runs a miniature with the default all-MiniLM-L6-v2 that finishes in minutes on a
laptop CPU: a few hundred training examples, at most 64 tokens, 3-6 epochs, SST-2 scored on the first 400 of
its 872 dev examples, and lr 1e-4, ten times the paper's 1e-5, which barely moves MiniLM in a few dozen
steps. --scale gpu runs the paper's scale: roberta-base (see weights/README.md), Table 4's settings, full
training sets, the 9x9 grid, 20 epochs with early stopping (patience 5):

    python experiments.py all --scale gpu --data-dir ../shared/glue --out runs/gpu
    python experiments.py seeds --scale gpu --data-dir ../shared/glue --out runs/gpu --task rte --shots full
    python experiments.py compare --scale gpu --data-dir ../shared/glue --out runs/gpu

--scale gpu-minilm is compare alone, with the default MiniLM on full training sets (MRPC, RTE, STS-B), about 25
minutes on one H100 as four shards side by side (see its preset):

    for k in 1 2 3 4; do python experiments.py compare --scale gpu-minilm --shard $k/4 --out runs/gpu-minilm & done; wait

Any preset can be overridden: --task (compare: a list, rte,mrpc), --epochs, --limit, --max-len, --lr,
--batch-size, --seeds N, --shots 16,64,256 (or full), --values 0.1,0.5,0.9 (the p and q of the grid),
--p/--q (seeds, figure1 and compare), --dev-limit N (0: the whole dev set), --holdout F, --patience N,
--methods ft,ga,... (compare's arms, by the keys of ARMS).

compare: plain fine-tuning against AD-DROP with GA attribution (and GA-train, with the authors' first pass:
training mode, dropout on), RD (random dropping at the same rate) and, at --scale gpu, AA; and against R-Drop,
on the same seeds (a seed gives every arm the same training sample, holdout split, data order and head init).
p and q are Table 4's for the model type and task, the layers train.py's per-task default and R-Drop's alpha
its paper's, all fixed before any run. Every run holds out a stratified part of its training set (--holdout)
to pick its best epoch; the GLUE dev set is only reported, at that epoch, and MRPC's runs are also scored on
PAWS-Wiki test with the same weights (out of distribution). A regime check, from the fine-tuning runs alone,
says per task whether fine-tuning learns it (beats the best constant prediction by 5 points, every seed above
it) and overfits it (dev loss ends 5% above its lowest in most seeds); a task that fails is reported apart, as
not informative at this scale. The tables give mean +- std per arm, the paired difference from fine-tuning
per seed with its 95% t interval and wins/ties/losses, the seeds needed where the interval includes zero,
and dev loss per epoch.

Sharding: --shard K/N runs only the K-th of N disjoint slices of an analysis's runs, so that N copies can run
side by side and share the output folder. The runs are dealt like cards after a fixed shuffle (seed 0) of
the analysis's list of runs, so each shard gets about len/N runs and a mix of cheap and costly ones; the
deal depends only on the run list and N. Every copy, and a last one without --shard, reads all finished
runs back from --out and writes the tables and figures from them, saying how many are still missing;
--tables-only does just that, training nothing, at any time.

    python experiments.py compare --scale gpu --out runs/gpu                              # one GPU
    for k in 1 2 3 4 5 6 7 8; do CUDA_VISIBLE_DEVICES=$((k-1)) python experiments.py compare --scale gpu \\
        --out runs/gpu --shard $k/8 > shard$k.log 2>&1 & done; wait                       # 8 GPUs, one machine
    sbatch --array=1-8 --gres=gpu:1 --wrap 'python experiments.py compare --scale gpu --out runs/gpu \\
        --shard $SLURM_ARRAY_TASK_ID/8'                                                   # a Slurm array

Outputs: under --out, each analysis writes ANALYSIS_TASK.png and ANALYSIS_TASK.csv/.json (the grid: two
figures, _heatmap and _cross_tuning; compare: compare.png, compare.csv, compare_runs.csv, compare_epochs.csv
and compare.json, compare_small the same under its name), and keeps one folder per training run in
--out/ANALYSIS_TASK/ (compare: --out/compare/TASK/), named by its settings. compare.json names the preset its runs
come from, and another preset is refused that folder (the compare of before issue 17 wrote --out/compare/ too:
its runs now belong to compare_small; move them to --out/compare_small/). A
rerun resumes: a run whose metrics.json says "finished" with the same settings is read back, not retrained,
and a run that was stopped after an epoch continues from its train_state.pt (train.py --resume). Start a
run without --shard only when no shard is running: it trains whatever is missing.

Honest reporting: p and q in the grid are picked on the same dev set that is reported (as in the paper),
and every score of prior, grid and seeds is the best dev epoch of its run (early stopping on dev, as in the
paper). compare never selects anything on dev.
"""

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

import addrop
import data
import model as modeling
import train

# the miniature (cpu), the paper's scale (gpu), and compare with MiniLM on full data (gpu-minilm); None means
# train.py's default (Table 4). compare's "tasks" maps each task to its own overrides of the analysis-wide values
# beside it, its "methods" are the keys of ARMS (the arms, below); limit_first: --limit and --dev-limit take the
# first N rows, as they did before issue 17 (now a stratified sample drawn by the seed).
PRESETS = {
    "cpu": {
        "weights": None,  # all-MiniLM-L6-v2
        "prior":   dict(task="mrpc", limit=240, max_len=64, epochs=5, lr=1e-4),
        "grid":    dict(task="sst2", limit=160, max_len=64, epochs=3, lr=1e-4, dev_limit=400,
                        values=[0.1, 0.5, 0.9]),
        "seeds":   dict(task="sst2", shots=[16, 64], seeds=3, max_len=64, epochs=6, lr=1e-4, dev_limit=400),
        "figure1": dict(task="sst2", limit=192, max_len=64, epochs=2, lr=1e-4),
        # compare, fixed before any of its runs (issue 17): a regime where fine-tuning learns and overfits.
        # SST-2 and MRPC; 1000 training examples of each, a stratified sample drawn by the seed, of which a
        # stratified 200 are held out to pick the epoch (800 train); up to 10 epochs with patience 3; the full dev
        # sets; MRPC's runs also scored on PAWS-Wiki test; 8 seeds; 5 arms. AA, the old fourth arm, is left out for
        # time: it costs about what GA does, and attention as attribution is not this comparison's question.
        # lr 3e-5: the default model's own row in train.py, picked on holdout data (README, "Defaults for the
        # default model"); the miniatures' 1e-4 was for a few dozen steps, here there are up to 500. max_len
        # None: Table 4's (SST-2 120, MRPC 100), which cuts no SST-2 or MRPC example (the longest: 58 and 97
        # tokens) and a handful of PAWS pairs (longest 111); batches are padded to their longest, so a cap that
        # cuts nothing costs nothing, and 64 would save only ~12% of MRPC's time while cutting 19% of its pairs
        # (21% of PAWS's). group_by_length: batches of similar lengths (train.py --group-by-length), for time: in
        # random batches SST-2's sentences, 13 tokens on average, are padded to 35.
        #
        # Budget: 6 h wall as two --threads 1 shards, 43,200 core-seconds. One plain epoch on this machine with the
        # full dev set scored (issue 17's timings): SST-2 57 s, MRPC 88 s, of which training is ~84% and ~88% (the
        # rest scores dev and holdout, sorted by length), by MiniLM's per-step costs measured here (batch 16:
        # ~120 ms + 9.8 ms per padded token a training step). Grouping by length cuts a training step to ~0.54
        # (SST-2) and ~0.75 (MRPC) of that: SST-2 26 s of training + 9 s of scoring, MRPC 58 s + 11 s.
        # Arms, training relative to plain (bench.py's MiniLM steps; AD-DROP every other epoch): GA in the first
        # layer (SST-2) 1.67 -> 1.34, in all layers (MRPC) 1.90 -> 1.45, GA-train the same, RD 1.11 -> 1.06,
        # R-Drop 2 (the batch twice): 5 arms train 6.7 (SST-2) and 7.0 (MRPC) plain epochs' worth.
        # Per seed and epoch: SST-2 26 x 6.7 + 5 x 9 = 220 s; MRPC 58 x 7.0 + 5 x 11 = 457 s; x 8 seeds = 5,420 s.
        # PAWS: 8000 pairs, ~135 s, once per MRPC run: x 40 = 5,400 s.
        # At most, every run to epoch 10: 54,200 + 5,400 = 59,600 core-s = 8.3 h wall. Expected: the best holdout
        # epoch near 3-4 (at this lr SST-2 peaked after ~230 steps, here 4-5 epochs of 50), the stop 3 later, so
        # 6.5-7.5 epochs: 35,200-40,700 + 5,400 = 5.6-6.4 h wall. It can run over 6 h. Runs go task by task
        # (SST-2, then MRPC; --task mrpc,sst2 for the other order), so a sweep stopped at 6 h has SST-2 whole and
        # MRPC's last seeds missing, and a rerun resumes it.
        "compare": dict(seeds=8, epochs=10, patience=3, lr=3e-5, holdout=0.2, max_len=None, limit=1000,
                        dev_limit=None, group_by_length=True, tasks={"sst2": {}, "mrpc": {}},
                        methods=["ft", "ga", "gatrain", "rd", "rdrop"]),
        # the compare of the README's first table, kept to reproduce it (issue 17 found it too small to answer):
        # lr 1e-4 as in the other miniatures, 4 epochs (two plain, two AD-DROP), a quarter of each subset held out
        # for selection, the first 200 examples per task so that 4 arms x 5 seeds x 3 tasks fit in 2 hours
        "compare_small": dict(seeds=5, epochs=4, patience=4, lr=1e-4, holdout=0.25, max_len=64, limit=200,
                              dev_limit=200, limit_first=True, tasks={"sst2": {}, "stsb": {}, "rte": {}},
                              methods=["ft", "ga", "rd", "aa"]),
    },
    "gpu": {
        "weights": "roberta-base",
        "prior":   dict(task="mrpc", limit=None, max_len=None, epochs=10, lr=None),
        "grid":    dict(task="rte", limit=None, max_len=None, epochs=20, lr=None,
                        values=[round(0.1 * i, 1) for i in range(1, 10)]),
        "seeds":   dict(task="sst2", shots=[16, 64, 256], seeds=5, max_len=None, epochs=20, lr=None),
        "figure1": dict(task="sst2", limit=None, max_len=None, epochs=2, lr=None),
        "compare": dict(seeds=8, epochs=20, patience=5, holdout=0.1, tasks={"rte": {}, "mrpc": {}, "cola": {}, "stsb": {}},
                        methods=["ft", "ga", "gatrain", "rd", "aa", "rdrop"]),
    },
    "gpu-minilm": {
        "weights": None,
        # compare with the default MiniLM on full training sets: MRPC (and PAWS), RTE, STS-B; train.py's MiniLM
        # row's lr (3e-5) and Table 4's max_len, holdout 0.1, up to 10 epochs with patience 3, 8 seeds, the 5 arms
        # of the cpu compare. Estimated ~25 min on one H100 as 4 shards side by side. Measured there
        # (MiniLM-sized model, batch 16; a step is launch-bound, so about the same for any length up to 128):
        # a training step takes 20 ms plain, 32 ms GA (first or all layers), 35 ms GA-train, 21 ms RD, 20 ms
        # R-Drop (the batch twice, one forward), and scoring 4 ms a batch; one process keeps the GPU mostly idle,
        # and 4 processes together made 3.3x the steps per second of one (8: 3.9x). With AD-DROP every other
        # epoch, the 5 arms take ~114 ms per step. Steps per epoch: MRPC 207, RTE 141, STS-B 324, so 77 s of
        # training + 4 s of scoring per seed and epoch, and 2 s of PAWS per MRPC run. 8 seeds: 6,540 s of one
        # process at 10 epochs, 4,280 s at 6.5; / 3.3 = 33 and 22 min, plus a few minutes loading 120 runs.
        # SST-2 (3,789 steps an epoch: 58 min of one process per epoch of all its runs) and CoLA are left out.
        "compare": dict(seeds=8, epochs=10, patience=3, holdout=0.1, tasks={"mrpc": {}, "rte": {}, "stsb": {}},
                        methods=["ft", "ga", "gatrain", "rd", "rdrop"]),
    },
}
# these args may differ between a finished run and its rerun without making the result stale
IRRELEVANT = ("out", "data_dir", "device", "log_interval", "no_checkpoint", "threads", "resume")


class Run(NamedTuple):
    name: str   # its folder under the analysis's output folder
    argv: list  # train.py flags
    info: dict  # where its result goes in the tables: method, seed, p, q, ...


def tasks(args, analysis):
    preset = PRESETS[args.scale][analysis]
    return args.tasks or list(preset.get("tasks") or [preset["task"]])


def setting(args, analysis, key, task=None):
    """A command-line value where one was given, else the task's value in the preset of --scale, else the
    analysis's."""
    v = getattr(args, key, None)
    if v is not None:
        return v
    preset = PRESETS[args.scale][analysis]
    return preset.get("tasks", {}).get(task, {}).get(key, preset.get(key))


def train_flags(args, analysis, task, **extra):
    """The train.py flags of one run: the analysis's settings for this task, then run-specific ones."""
    flags = {k: setting(args, analysis, k, task) for k in
             ("epochs", "limit", "limit_first", "max_len", "lr", "batch_size", "holdout", "patience", "dtype",
              "group_by_length")}
    flags.update(task=task, dev_limit=setting(args, analysis, "dev_limit", task) or None, threads=args.threads,
                 weights=args.weights or PRESETS[args.scale]["weights"], data_dir=args.data_dir,
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


def model_config(args, checkpoint=None):
    """The config of --weights (or the preset's), or of a --checkpoint folder."""
    flag, folder = ("--checkpoint", Path(checkpoint)) if checkpoint else \
        ("--weights", modeling.resolve_weights(args.weights or PRESETS[args.scale]["weights"]))
    if not (folder / "config.json").is_file():
        raise modeling.WeightsError(f"{flag} {folder}: {folder / 'config.json'} does not exist; see weights/README.md")
    return modeling.Config.from_json(folder / "config.json")


def table4_pq(args, task):
    """Table 4's p and q for the task and the model type (bert or roberta), unless --p/--q say otherwise."""
    t4 = train.SETTINGS[task][model_config(args).model_type]
    return (args.p if args.p is not None else t4["p"]), (args.q if args.q is not None else t4["q"])

# -----------------------------------------------------------------------------
# one run, read back or trained; a sweep of runs, sharded

def train_args(run_dir, argv, resume=False):
    return train.parse_args(argv + ["--out", str(run_dir), "--log-interval", "1000000"] + ["--resume"] * resume)


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
    stale = metrics.exists() and not same_settings(json.loads(metrics.read_text())["args"], targs)
    resume = (run_dir / train.STATE).exists() and not stale
    if stale:
        print(f"  {label}: settings changed since {metrics} was written; training again")
    print(f"  {label}: {'resuming' if resume else 'training'} ({' '.join(argv)})", flush=True)
    try:
        return train.run(train_args(run_dir, argv, resume))
    except train.Diverged as e:  # any other exit is a setup error, which would stop every run: it stops the sweep
        failed = {"args": vars(targs), "error": str(e.code), "best_metric": float("nan"), "history": []}
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "failed.json", failed)
        print(f"  {label}: FAILED: {e.code}")
        return failed
    except train.Busy:  # another process of the sweep is training it: so several processes can share one shard
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
    for i, r in enumerate(mine, 1):
        run_once(base / r.name, r.argv, f"[{i}/{len(mine)}] {r.name}")
    results = [read_back(base / r.name, train_args(base / r.name, r.argv)) for r in runs]
    missing = sum(res is None for res in results)
    if missing:
        print(f"{analysis}: {missing} of {len(runs)} runs not finished yet (other shards, or stopped); "
              f"the tables below are from the {len(runs) - missing} finished ones")
    report(args, base, runs, results)

# -----------------------------------------------------------------------------
# tables and figures, written whole even when shards finish at the same time

def atomic_write(path, write):
    """model.atomic_write with a temporary file of its own. Shards finishing together write the same tables;
    a unique name (mkstemp), on one machine or several over a shared folder, keeps one from renaming the
    other's half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    modeling.atomic_write(path, write, tmp=tmp)


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

# -----------------------------------------------------------------------------
# 1. the prior experiment (Section 2.2, Figure 2)

STRATEGIES = {  # name -> train.py flags; all in the first layer at rate 0.3 (p=0.3, every candidate dropped)
    "no dropping": dict(p=0),
    "random": dict(p=0.3, q=1.0, attribution="rd"),
    "low attribution": dict(p=0.3, q=1.0, attribution="ga", labels="gold", drop_low=True),
    "high attribution": dict(p=0.3, q=1.0, attribution="ga", labels="gold"),
}


def plan_prior(args):
    task, epochs = tasks(args, "prior")[0], setting(args, "prior", "epochs")
    # every epoch drops (no cross-tuning), only the first layer, and no early stop: the full curves
    return output_base(args, "prior"), [
        Run(name.replace(" ", "_"), train_flags(args, "prior", task, seed=args.seed, layers="first",
                                                no_cross_tuning=True, patience=epochs, **flags), {"strategy": name})
        for name, flags in STRATEGIES.items()]


def report_prior(args, base, runs, results):
    done = {r.info["strategy"]: res for r, res in zip(runs, results) if res is not None}
    rows = [{"strategy": name, "epoch": h["epoch"], "train_loss": round(h["train_loss"], 5),
             "dev_loss": round(h["dev_loss"], 5), "dev_metric": round(h["metric"], 5),
             "dropped": round(h["dropped"], 4)} for name, res in done.items() for h in res["history"]]
    write_csv(f"{base}.csv", rows)
    plt, fig, axes = plt_figure(1, 2, figsize=(9, 3.4))
    for name, res in done.items():
        ep = [h["epoch"] for h in res["history"]]
        axes[0].plot(ep, [h["train_loss"] for h in res["history"]], marker="o", ms=3, label=name)
        axes[1].plot(ep, [h["dev_loss"] for h in res["history"]], marker="o", ms=3, label=name)
    task = data.get_task(tasks(args, "prior")[0]).name
    for ax, what in zip(axes, ("training loss (of the masked forward)", "dev loss")):
        ax.set(xlabel="epoch", ylabel="loss", title=f"{task}: {what}")
        ax.set_xticks(range(1, max((len(r["history"]) for r in done.values()), default=1) + 1))
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, f"{base}.png", dpi=110)
    print(f"prior: wrote {base}.png and {base}.csv")
    for name, res in done.items():
        print(f"  {name:<17} train/dev loss per epoch: "
              + " ".join(f"{h['train_loss']:.3f}/{h['dev_loss']:.3f}" for h in res["history"]))

# -----------------------------------------------------------------------------
# 2 and 3. p/q sensitivity (Figure 6) and the cross-tuning ablation (Figure 4)

def plan_grid(args):
    task = tasks(args, "grid")[0]
    values = args.values or PRESETS[args.scale]["grid"]["values"]
    runs = [Run("baseline", train_flags(args, "grid", task, seed=args.seed, p=0), {})]
    for ct in (True, False):
        for p in values:
            for q in values:
                runs.append(Run(f"p{p}_q{q}_{'ct' if ct else 'noct'}",
                                train_flags(args, "grid", task, seed=args.seed, p=p, q=q, no_cross_tuning=not ct),
                                {"p": p, "q": q, "cross_tuning": ct}))
    return output_base(args, "grid"), runs


def report_grid(args, base, runs, results):
    task = tasks(args, "grid")[0]
    values = args.values or PRESETS[args.scale]["grid"]["values"]
    ft = results[0]["best_metric"] if results[0] is not None else math.nan  # plain fine-tuning
    rows = [{**r.info, "best_dev": round(res["best_metric"], 5), "minus_baseline": round(res["best_metric"] - ft, 5),
             "best_epoch": res.get("best_epoch"), "seconds": round(res.get("seconds", 0), 1)}
            for r, res in zip(runs[1:], results[1:]) if res is not None]
    write_csv(f"{base}.csv", rows)
    metric = data.get_task(task).metrics[0]
    dev_limit = setting(args, "grid", "dev_limit")
    summary = {"task": task, "metric": metric, "dev_limit": dev_limit, "baseline": ft, "values": values,
               "cells_missing": sum(res is None for res in results[1:]),
               "note": "p and q are picked on the same dev set that is reported, as in the paper; "
                       "each score is the best dev epoch of one run (one seed)"}
    for ct in (True, False):
        cells = [r for r in rows if r["cross_tuning"] is ct]
        s = np.array([r["best_dev"] for r in cells], dtype=float)
        best = max(cells, key=lambda r: r["best_dev"], default=None)
        summary["with" if ct else "without"] = {
            "mean": mean_std(s)[0], "std": float(np.std(s)) if len(s) else math.nan,
            "min": float(s.min()) if len(s) else math.nan,
            "cells_above_baseline": int((s > ft).sum()), "cells": len(s),
            "best": best and {"p": best["p"], "q": best["q"], "dev": best["best_dev"]}}
    write_json(f"{base}.json", summary)

    # Figure 6: metric minus baseline, rows p, columns q. The paper rescales with MaxAbsScaler to [-1, 1];
    # a colour scale symmetric around 0 shows the same picture, and the cells keep the real points.
    n = len(values)
    D = np.full((2, n, n), np.nan)  # [with, without] cross-tuning, rows p, columns q
    for r in rows:
        D[0 if r["cross_tuning"] else 1, values.index(r["p"]), values.index(r["q"])] = 100 * r["minus_baseline"]
    lim = np.nanmax(np.abs(D), initial=0, where=np.isfinite(D)) or 1.0
    size = 2.2 + 0.45 * n
    plt, fig, axes = plt_figure(1, 2, figsize=(2 * size + 1.0, size + 0.3))
    for k, ax in enumerate(axes):
        im = ax.imshow(D[k], cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_xticks(range(n), [str(v) for v in values])
        ax.set_yticks(range(n), [str(v) for v in values])
        ax.set(xlabel="q", ylabel="p" if k == 0 else None)
        ax.set_title(f"{'with' if k == 0 else 'without'} cross-tuning", fontsize=9)
        if n <= 9:
            for a in range(n):
                for b in range(n):
                    ax.text(b, a, f"{D[k, a, b]:+.1f}", ha="center", va="center", fontsize=7 if n > 5 else 9)
    fig.colorbar(im, ax=axes, fraction=0.046)
    fig.suptitle(f"{data.get_task(task).name}: AD-DROP minus fine-tuning ({fmt(ft)}), dev {metric} points"
                 f"{f' (first {dev_limit} dev examples)' if dev_limit else ''}", fontsize=10)
    save_figure(fig, f"{base}_heatmap.png", dpi=100, bbox_inches="tight")

    # Figure 4: one point per (p, q), with and without cross-tuning
    rng = np.random.default_rng(0)
    plt, fig, ax = plt_figure(figsize=(4.2, 3.6))
    for x, ct in enumerate((True, False)):
        s = np.array([100 * r["best_dev"] for r in rows if r["cross_tuning"] is ct])
        ax.scatter(x + rng.uniform(-0.12, 0.12, len(s)), s, s=18, alpha=0.8, color=f"C{x}")
        if len(s):
            ax.errorbar(x + 0.25, s.mean(), yerr=s.std(), fmt="o", color="k", capsize=3, ms=4,
                        label="mean ± std" if x == 0 else None)
    ax.axhline(100 * ft, color="gray", ls="--", lw=1, label=f"fine-tuning {fmt(ft)}")
    ax.set_xticks([0, 1], ["with\ncross-tuning", "without\ncross-tuning"])
    ax.set_xlim(-0.5, 1.5)
    ax.set(ylabel=f"dev {metric} (best epoch)")
    ax.set_title(f"{data.get_task(task).name}: every (p, q) of the {n}x{n} grid", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    save_figure(fig, f"{base}_cross_tuning.png", dpi=110)
    print(f"grid: wrote {base}_heatmap.png, {base}_cross_tuning.png, {base}.csv and {base}.json")
    print(f"  fine-tuning baseline {fmt(ft)}")
    for key in ("with", "without"):
        s = summary[key]
        best = f"best {fmt(s['best']['dev'])} at p={s['best']['p']} q={s['best']['q']} (picked on dev)" \
            if s["best"] else "no cell finished"
        print(f"  {key:<7} cross-tuning: mean {fmt(s['mean'])} +- {fmt(s['std'])}, min {fmt(s['min'])}, "
              f"{s['cells_above_baseline']}/{s['cells']} cells above FT, {best}")

# -----------------------------------------------------------------------------
# 4. repeated runs and few-shot (Tables 3 and 5)

def plan_seeds(args):
    task = tasks(args, "seeds")[0]
    p, q = table4_pq(args, task)
    limit = setting(args, "seeds", "limit")
    runs = []
    for shots in args.shots or PRESETS[args.scale]["seeds"]["shots"]:
        col = f"{shots}-shot" if shots != "full" else f"first {limit}" if limit else "full data"
        for method, flags in {"fine-tuning": dict(p=0), f"AD-DROP p={p} q={q}": dict(p=p, q=q)}.items():
            for seed in range(setting(args, "seeds", "seeds")):
                name = f"{col.replace('-', '')}_{'ft' if flags['p'] == 0 else f'p{p}_q{q}'}_seed{seed}".replace(" ", "")
                argv = train_flags(args, "seeds", task, seed=seed, shots=None if shots == "full" else shots, **flags)
                runs.append(Run(name, argv, {"method": method, "data": col, "p": p, "q": q}))
    return output_base(args, "seeds"), runs


def report_seeds(args, base, runs, results):
    task = tasks(args, "seeds")[0]
    scores = {}  # (method, data) -> [best dev per finished seed]
    for r, res in zip(runs, results):
        scores.setdefault((r.info["method"], r.info["data"]), [])
        if res is not None:
            scores[(r.info["method"], r.info["data"])].append(res["best_metric"])
    rows = [{"method": m, "data": c, "seeds": len(v), "mean": round(mean_std(v)[0], 5),
             "std": round(mean_std(v)[1], 5), "scores": " ".join(f"{x:.4f}" for x in v)}
            for (m, c), v in scores.items()]
    write_csv(f"{base}.csv", rows)
    # Tables 3 and 5 in one: a row per method, a column per data size, mean +- std x100
    cols = list(dict.fromkeys(r["data"] for r in rows))
    cell = {(r["method"], r["data"]): f"{fmt(r['mean'])} ± {fmt(r['std'])}" for r in rows}
    table = ["| method | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    table += [f"| {m} | " + " | ".join(cell[(m, c)] for c in cols) + " |" for m in dict.fromkeys(r["method"] for r in rows)]
    n_seeds = setting(args, "seeds", "seeds")
    p, q = runs[0].info["p"], runs[0].info["q"]
    write_json(f"{base}.json", {
        "task": task, "metric": data.get_task(task).metrics[0], "dev_limit": setting(args, "seeds", "dev_limit"),
        "seeds": n_seeds, "rows": rows, "table": table,
        "note": f"p={p}, q={q} are Table 4's values for this model type (the paper picked them on dev); "
                "each score is the best dev epoch of its run; in few-shot runs each seed draws other examples"})
    print(f"seeds: wrote {base}.csv and {base}.json; {data.get_task(task).name} dev "
          f"{data.get_task(task).metrics[0]} x100, mean ± std (n-1) over {n_seeds} seeds")
    print("\n".join("  " + line for line in table))

# -----------------------------------------------------------------------------
# 5. Figure 1 for one example

def plan_figure1(args):
    base = output_base(args, "figure1")
    H = model_config(args, args.checkpoint).num_attention_heads
    if args.head >= H:
        sys.exit(f"error: --head {args.head}: the model has {H} heads per layer (0 to {H - 1})")
    if args.checkpoint:
        return base, []
    # a short plain fine-tuning, so that the head's prediction means something; its checkpoint is kept
    return base, [Run("model", train_flags(args, "figure1", tasks(args, "figure1")[0], seed=args.seed,
                                           no_checkpoint=False), {})]


def report_figure1(args, base, runs, results):
    if runs and results[0] is None:
        print("figure1: the model is not fine-tuned yet (another shard trains it); no figure")
        return
    task = tasks(args, "figure1")[0]
    ckpt = Path(args.checkpoint) if args.checkpoint else base / runs[0].name
    net = modeling.from_pretrained(ckpt, data.num_labels(task)).eval()
    tok = data.load_tokenizer(ckpt, 512)
    dev = data.load_split(task, "dev", data.resolve_data_dir(args.data_dir))
    # one short dev example, so that the token labels stay readable
    lo, hi = 9, 14
    ex = next(e for e in dev if lo <= len(tok.encode(e.text_a, e.text_b).ids) <= hi)
    enc = tok.encode(ex.text_a, ex.text_b)
    batch = {"input_ids": torch.tensor([enc.ids]), "attention_mask": torch.ones(1, len(enc.ids), dtype=torch.long),
             "token_type_ids": torch.tensor([enc.type_ids])}
    p, q = table4_pq(args, task)
    layer, head = 0, args.head
    with torch.no_grad():
        logits, attns = net(**batch)
    B = addrop.attribute(net, batch, [layer], "ga")[layer]  # pseudo label, Eq. 5
    g = torch.Generator().manual_seed(args.seed)
    M = addrop.drop_mask(B, batch["attention_mask"], p, q, generator=g)  # Eq. 6-7
    cand = addrop.drop_mask(B, batch["attention_mask"], p, 1.0)  # q = 1: the whole candidate region
    masks = [None] * net.cfg.num_hidden_layers
    masks[layer] = M
    with torch.no_grad():
        _, attns2 = net(**batch, masks=masks)
    A, Bh, drop, Ah2 = attns[layer][0, head], B[0, head], M[0, head], attns2[layer][0, head]
    labels = data.get_task(task).labels

    plt, fig, axes = plt_figure(1, 4, figsize=(15, 4.3))
    T = len(enc.tokens)
    panels = [(A, "Blues", "(a) attention A"),
              (Bh, "RdBu_r", f"(b) attribution B = dF/dA\n(pseudo label '{labels[logits.argmax().item()]}')"),
              (A, "Blues", f"(c) candidates (top p={p}, boxed)\nand dropped (x, q={q})"),
              (Ah2, "Blues", "(d) attention after dropping\n(second forward)")]
    for ax, (X, cmap, title) in zip(axes, panels):
        X = X.numpy()
        lim = np.abs(X).max()
        ax.imshow(X, cmap=cmap, vmin=-lim if cmap == "RdBu_r" else 0, vmax=lim)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(T), enc.tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(T), enc.tokens, fontsize=7)
    for i in range(T):
        for j in range(T):
            if cand[0, head, i, j]:
                axes[2].add_patch(plt.Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, ec="red", lw=1, ls=":"))
            if drop[i, j]:
                axes[2].plot(j, i, "x", color="red", ms=5, mew=1.2)
    fig.suptitle(f"{data.get_task(task).name} dev example, layer {layer + 1}, head {head + 1}: "
                 f"{drop.sum().item()} of {T * T} positions dropped; gold label '{labels[ex.label]}'", fontsize=10)
    fig.tight_layout()
    save_figure(fig, f"{base}.png", dpi=90)
    write_json(f"{base}.json", {
        "task": task, "text_a": ex.text_a, "text_b": ex.text_b, "tokens": enc.tokens, "layer": layer, "head": head,
        "p": p, "q": q, "seed": args.seed, "gold": labels[ex.label], "pseudo": labels[logits.argmax().item()],
        "A": A.round(decimals=4).tolist(), "B": Bh.round(decimals=6).tolist(), "dropped": drop.int().tolist(),
        "candidates": cand[0, head].int().tolist(), "A_after": Ah2.round(decimals=4).tolist()})
    print(f"figure1: wrote {base}.png and {base}.json ({' '.join(enc.tokens)})")

# -----------------------------------------------------------------------------
# 6. does AD-DROP help? Paired seeds, every setting fixed before the runs, the dev set only reported, and a
# check that the task is one where the question has an answer: plain fine-tuning learns it and overfits it

# R-Drop (Liang et al., NeurIPS 2021), the regulariser AD-DROP has to beat: the loss of two forwards with their own
# dropout, plus alpha times the symmetric KL of their predictions, 1/2 (KL(P1||P2) + KL(P2||P1)) (their Eq. 3).
# For GLUE they tuned alpha per task over {0.1, 0.5, 1.0} and published no per-task value; the GLUE criterion of
# their released code (fairseq_src/examples/roberta, reg_sentence_prediction) defaults to 1.0 and their GLUE run
# script sets no other. We take 1.0: the one value their public GLUE runs use, and the strongest of the three, for
# runs chosen to overfit. Their loss sums the two passes' cross-entropies; train.py averages them, so its --rdrop
# is half the paper's alpha for the same balance (Adam does not see the overall factor of 2).
RDROP_ALPHA = 1.0
# the arms: name -> (run folder and --methods key, train.py flags). Every AD-DROP arm takes Table 4's p and q for
# the task and model type and train.py's per-task layers (Section 3.1); fine-tuning and R-Drop drop no attention.
ARMS = {
    "fine-tuning": ("ft", dict(p=0)),
    "GA": ("ga", dict(attribution="ga")),
    # the authors' code's first pass: training mode, dropout on, A taken after attention dropout (REFERENCE.md)
    "GA-train": ("gatrain", dict(attribution="ga", first_pass="train")),
    "RD": ("rd", dict(attribution="rd")),
    "AA": ("aa", dict(attribution="aa")),
    "R-Drop": ("rdrop", dict(p=0, rdrop=RDROP_ALPHA / 2)),
}
ARM_NAMES = {key: name for name, (key, _) in ARMS.items()}
OOD = {"mrpc": "paws", "qqp": "paws"}  # paraphrase tasks: their runs are also scored on PAWS-Wiki test (train.py --ood)
# the regime check, fixed before any run (see regime_check)
LEARN_MARGIN = 0.05  # the fine-tuning mean must beat the best constant prediction by 5 points of the metric
OVERFIT_RISE = 0.05  # a run overfits when its dev loss ends at least 5% above its lowest


def t_quantile(prob, df):
    """The prob-quantile of Student's t with df degrees of freedom, for prob in [0.5, 1): bisection on the
    CDF, which is 1/2 plus Simpson's rule over the density from 0 (no scipy here)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x):
        u = np.linspace(0.0, x, 2001)  # 2000 intervals, h = x / 2000
        f = c * (1 + u * u / df) ** (-(df + 1) / 2)
        return 0.5 + x / 6000 * (f[0] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum() + f[-1])

    lo, hi = 0.0, 100.0  # t_{0.995, 1} = 63.7
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < prob else (lo, mid)
    return (lo + hi) / 2


MAX_SEEDS = 100_000  # seeds_needed above this is reported as math.inf: "more than MAX_SEEDS"


def paired_summary(d):
    """Differences method minus fine-tuning, one per seed: mean, sd, the 95% t interval of the mean,
    wins/ties/losses, and where the interval includes 0, the seeds a paired t-test would need to find the
    observed mean at this sd with 80% power: the smallest n with n >= ((t_.975,n-1 + t_.8,n-1) sd / mean)^2,
    or math.inf where that is above MAX_SEEDS (a mean of 0, or of rounding: scores stored to 5 decimals)."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    mean, sd = mean_std(d)
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n) if n > 1 else math.nan
    lo, hi = mean - half, mean + half
    needed = None
    if not lo > 0 and not hi < 0 and math.isfinite(half):  # the interval includes 0
        needed = math.inf
        if mean != 0:
            # the normal quantiles 1.960 + 0.842 are below the t ones: no n under their answer can do
            needed = max(2, int((2.8016 * sd / mean) ** 2))
            while needed <= MAX_SEEDS and \
                    needed < ((t_quantile(0.975, needed - 1) + t_quantile(0.8, needed - 1)) * sd / mean) ** 2:
                needed += 1
            needed = needed if needed <= MAX_SEEDS else math.inf
    return {"n": n, "mean": mean, "sd": sd, "ci_low": lo, "ci_high": hi, "wins": int((d > 0).sum()),
            "ties": int((d == 0).sum()), "losses": int((d < 0).sum()), "seeds_needed": needed}


def constant_baseline(task, labels):
    """The best score on these labels of a prediction that ignores its input, in the task's main metric:
    accuracy, the majority class's share; F1 (of class 1), always answering 1, 2 pos / (n + pos), since always 0
    scores 0 (on MRPC, where 1 is the majority, that is also always answering the majority); Matthews, Pearson
    and Spearman, 0, what data.py gives a constant prediction."""
    metric = data.get_task(task).metrics[0]
    y = np.asarray(labels)
    if metric == "accuracy":
        return float(np.bincount(y.astype(int)).max() / len(y))
    if metric == "f1":
        pos = float(np.sum(y == 1))
        return 2 * pos / (len(y) + pos)
    return 0.0


def overfits(history, rise=OVERFIT_RISE):
    """One run overfits: its dev loss at the last epoch is at least `rise` (relative) above its lowest, reached at
    an earlier epoch, and its training loss at the last epoch is below its value at that epoch. The lowest dev
    loss, not the holdout-selected epoch: dev loss often turns before accuracy does; and this only describes a
    run, it selects nothing."""
    if len(history) < 2:
        return False
    dev = [h["dev_loss"] for h in history]
    e = int(np.argmin(dev))
    return e < len(dev) - 1 and dev[-1] >= (1 + rise) * dev[e] and history[-1]["train_loss"] < history[e]["train_loss"]


def regime_check(ft, baseline, score, margin=LEARN_MARGIN):
    """Can this task answer the question at this scale? From its finished plain fine-tuning runs only (seed ->
    result), never from an AD-DROP run:
    LEARNS: their mean dev score is at least `margin` above `baseline` (constant_baseline on the dev set) and every
      seed's is above it, so that no seed sits at a constant prediction (MRPC's way of failing: always
      'paraphrase', 68.4%). 5 points is over two standard errors of one dev accuracy here (1.7 points on SST-2's
      872 at 51%, 2.3 on MRPC's 408 at 68%): a mean that clears it is not dev-set noise around a constant predictor.
    OVERFITS: more than half of the runs overfit (overfits(): dev loss ends 5% above its lowest while the training
      loss ends below its value there), so that a regulariser has something to correct.
    A task that fails either is 'not informative at this scale': its rows are reported apart, not as evidence."""
    scores = {s: score(res) for s, res in ft.items()}
    over = {s: overfits(res["history"]) for s, res in ft.items()}
    n = len(scores)
    out = {"n": n, "baseline": baseline, "mean": mean_std(scores.values())[0] if n else None,
           "min": min(scores.values()) if n else None, "scores": scores, "overfit_by_seed": over,
           "overfit_seeds": sum(over.values()), "learns": None, "overfits": None, "informative": None}
    if n == 0:
        return {**out, "label": "unknown", "verdict": "unknown: no fine-tuning run has finished"}
    out["overfits"] = 2 * out["overfit_seeds"] > n
    why = [] if out["overfits"] else [f"does not overfit: {out['overfit_seeds']} of {n} seeds"]
    if baseline is None:
        why.insert(0, "the dev set could not be read for the constant baseline")
    else:
        out["learns"] = out["mean"] >= baseline + margin and out["min"] > baseline
        if not out["learns"]:
            why.insert(0, f"does not learn: mean {fmt(out['mean'])}, lowest seed {fmt(out['min'])}, "
                          f"constant prediction {fmt(baseline)}")
    out["informative"] = not why
    label = "informative" if not why else "not informative at this scale"
    return {**out, "label": label, "verdict": label + (f" ({'; '.join(why)})" if why else "")}


def plan_compare(args, analysis="compare"):
    """Every run of compare, task by task in the preset's order, then seed by seed, then arm by arm: a shard runs
    its part in this order, so a sweep stopped early has whole tasks rather than a few seeds of every task."""
    base = Path(args.out) / analysis
    preset_of_folder(args, analysis, base)
    methods = [ARM_NAMES[k] for k in args.methods or PRESETS[args.scale][analysis]["methods"]]
    runs = []
    for task in tasks(args, analysis):
        p, q = table4_pq(args, task)  # fixed before any run, never chosen on the reported dev set
        for seed in range(setting(args, analysis, "seeds", task)):
            for method in methods:
                key, flags = ARMS[method]
                flags = {**flags, **(dict(p=p, q=q) if "attribution" in flags else {}),
                         **(dict(ood=OOD[task]) if task in OOD else {})}
                runs.append(Run(f"{task}/{key}_seed{seed}", train_flags(args, analysis, task, seed=seed, **flags),
                                {"task": task, "method": method, "seed": seed, "p": flags.get("p", 0),
                                 "q": flags.get("q", 0), "alpha": RDROP_ALPHA if flags.get("rdrop") else 0}))
    return base, runs


def preset_of_folder(args, analysis, base):
    """compare.json names the preset its runs were made with. Another preset writing into the same folder would
    train its own runs over them (the run folders share names): refused. A compare.json without that name was
    written by the cpu compare of before issue 17, now compare_small."""
    f = Path(f"{base}.json")
    if not f.is_file():
        return
    made = json.loads(f.read_text()).get("preset", "cpu/compare_small")
    if made != f"{args.scale}/{analysis}":
        sys.exit(f"error: {f} says its runs in {base}/ were made by `{made.split('/')[1]} --scale {made.split('/')[0]}`, "
                 f"not by `{analysis} --scale {args.scale}`: pass another --out, or move {base}/ and {base}.* aside")


def dev_baseline(args, analysis, task):
    """constant_baseline on the task's dev set; a --dev-limit sample stands for it (stratified: its class shares
    are within one example of the full set's), or its first N with limit_first. None where it cannot be read."""
    try:
        dev = data.load_split(task, "dev", data.resolve_data_dir(args.data_dir))
    except data.DataError:
        return None
    limit = setting(args, analysis, "dev_limit", task)
    if limit and setting(args, analysis, "limit_first", task):
        dev = dev[:limit]
    return constant_baseline(task, [e.label for e in dev])


def dev_score(res):
    return res.get("dev_at_best", res["best_metric"])  # dev at the best holdout epoch


def ood_score(res):
    return (res.get("ood") or {}).get("accuracy")  # the same weights on PAWS-Wiki test


def arm_rows(task, evaluated_on, by_method, score, info, regime):
    """A row per arm: mean +- sd of `score` over its seeds and, but for fine-tuning, the paired differences
    from fine-tuning on the seeds both have finished."""
    scored = {m: {s: v for s, res in by_seed.items() if (v := score(res)) is not None} for m, by_seed in by_method.items()}
    ft, rows = scored.get("fine-tuning", {}), []
    for method, by_seed in scored.items():
        if not by_seed:
            continue
        i = info[(task, method)]
        mean, sd = mean_std(by_seed.values())
        row = {"task": task, "evaluated_on": evaluated_on, "metric": data.get_task(evaluated_on).metrics[0],
               "method": method, "p": i["p"], "q": i["q"], "alpha": i["alpha"], "seeds": len(by_seed),
               "mean": mean, "sd": sd, "regime": regime["label"]}
        if method != "fine-tuning":
            paired = sorted(set(by_seed) & set(ft))
            row.update({f"diff_{k}": v for k, v in paired_summary([by_seed[s] - ft[s] for s in paired]).items()})
        rows.append(row)
    return rows


def epoch_rows(task, by_method):
    """Per arm and epoch, over the seeds that reached it: dev loss, its paired difference from fine-tuning,
    the gap dev loss - train loss, and the dev metric."""
    ft, rows = by_method.get("fine-tuning", {}), []
    for method, by_seed in by_method.items():
        for e in range(1, max((len(res["history"]) for res in by_seed.values()), default=0) + 1):
            hs = {s: res["history"][e - 1] for s, res in by_seed.items() if len(res["history"]) >= e}
            fts = {s: res["history"][e - 1] for s, res in ft.items() if len(res["history"]) >= e}
            paired = sorted(set(hs) & set(fts))
            rows.append({"task": task, "method": method, "epoch": e, "seeds": len(hs),
                         "dev_loss": mean_std([h["dev_loss"] for h in hs.values()])[0],
                         "dev_loss_minus_ft": mean_std([hs[s]["dev_loss"] - fts[s]["dev_loss"] for s in paired])[0],
                         "gap": mean_std([h["dev_loss"] - h["train_loss"] for h in hs.values()])[0],
                         "dev_metric": mean_std([h["metric"] for h in hs.values()])[0]})
    return rows


def report_compare(args, base, runs, results):
    analysis = base.name
    done = {}  # task -> method -> seed -> result
    for r, res in zip(runs, results):
        done.setdefault(r.info["task"], {}).setdefault(r.info["method"], {})
        if res is not None and not res.get("error"):
            done[r.info["task"]][r.info["method"]][r.info["seed"]] = res
    info = {(r.info["task"], r.info["method"]): r.info for r in runs}
    regimes = {task: regime_check(by_method.get("fine-tuning", {}), dev_baseline(args, analysis, task), dev_score)
               for task, by_method in done.items()}
    per_run = [{"task": r.info["task"], "method": r.info["method"], "seed": r.info["seed"],
                "dev_at_best": round(dev_score(res), 5), "best_epoch": res.get("best_epoch"),
                "selection": res.get("selection", "dev"), "selection_metric": round(res["best_metric"], 5),
                "epochs": len(res["history"]), "overfits": overfits(res["history"]),
                **({f"ood_{k}": round(res["ood"][k], 5) for k in ("accuracy", "f1") if k in res["ood"]}
                   if res.get("ood") else {}), "seconds": round(res.get("seconds", 0), 1)}
               for r, res in zip(runs, results) if res is not None and not res.get("error")]
    summary, epochs = [], []
    for task, by_method in done.items():
        summary += arm_rows(task, task, by_method, dev_score, info, regimes[task])
        if task in OOD:
            summary += arm_rows(task, OOD[task], by_method, ood_score, info, regimes[task])
        epochs += epoch_rows(task, by_method)
    rnd = lambda rows: [{k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()} for row in rows]
    write_csv(f"{base}.csv", rnd(summary))
    write_csv(f"{base}_runs.csv", per_run)
    write_csv(f"{base}_epochs.csv", rnd(epochs))
    # for the out-of-distribution rows, what answering one label everywhere scores (PAWS: 55.8 always 0)
    constant = {}
    for name in dict.fromkeys(OOD[t] for t in done if t in OOD):
        try:
            y = np.array([e.label for e in data.load_split(name, "test", data.resolve_data_dir(args.data_dir))])
        except data.DataError:
            continue
        constant[name] = {label: float(np.mean(y == i)) for i, label in enumerate(data.get_task(name).labels)}
    table = compare_table(summary, epochs, regimes, constant)
    pq = {r.info["task"]: (r.info["p"], r.info["q"]) for r in runs if r.info["p"]}
    write_json(f"{base}.json", {
        "preset": f"{args.scale}/{analysis}",
        "tasks": {t: {"metric": data.get_task(t).metrics[0], **dict(zip("pq", pq.get(t, (None, None)))),
                      **({"ood": OOD[t]} if t in OOD else {})} for t in done},
        "regime": {t: {**rnd([g])[0], "scores": rnd([g["scores"]])[0]} for t, g in regimes.items()},
        "ood_constant_accuracy": {name: rnd([shares])[0] for name, shares in constant.items()},
        "summary": rnd(summary), "epochs": rnd(epochs), "table": table, "runs_missing": sum(r is None for r in results),
        "note": "each score is the dev metric at the epoch with the best holdout metric (dev is only reported); PAWS "
                "rows: the same weights on PAWS-Wiki test; p and q are Table 4's for the model type, fixed before "
                f"any run; R-Drop's alpha {RDROP_ALPHA} (the paper's scale); a difference is the arm minus "
                "fine-tuning on the same seed; CI: mean +- t_{0.975,n-1} sd/sqrt(n); seeds_needed: the smallest n "
                "with n >= ((t_{0.975,n-1} + t_{0.8,n-1}) sd/mean)^2 (a paired t-test at 80% power); regime: from "
                f"the fine-tuning runs alone, learns = mean dev at least {100 * LEARN_MARGIN:g} points above the best "
                "constant prediction and every seed above it, overfits = in more than half the seeds dev loss ends "
                f"{100 * OVERFIT_RISE:g}% above its lowest while train loss ends below its value there; the train "
                "loss of an AD-DROP epoch is that of its masked forward, so its gap is not a plain one"})
    compare_figure(figure_columns(done, epochs, regimes), f"{base}.png")
    print(f"{analysis}: wrote {base}.png, {base}.csv, {base}_runs.csv, {base}_epochs.csv and {base}.json\n")
    print("\n".join(table))


def resolve(r):
    """The last column of compare's table: how many seeds would resolve the observed mean difference."""
    needed = r["diff_seeds_needed"]
    if r["diff_n"] < 2:
        return "–"
    if needed is None:
        return "CI excludes 0"
    if needed == math.inf:
        return "never (mean 0)" if r["diff_mean"] == 0 else f"more than {MAX_SEEDS}"
    return str(needed)


def num(x, scale=100, sign="", fmt=".1f"):
    return "–" if x is None or not math.isfinite(x) else f"{scale * x:{sign}{fmt}}"


def arm_label(r):
    if r["alpha"]:
        return f"{r['method']} α={r['alpha']}"
    return r["method"] + (f" p={r['p']} q={r['q']}" if r["p"] else "")


def compare_table(summary, epochs, regimes, constant=None):
    """The Markdown for the README: the regime check per task; the scores and paired differences, the tasks
    where fine-tuning learns and overfits apart from the rest; then dev loss per epoch."""
    lines = ["regime check, from the fine-tuning runs alone: learns = mean dev at least "
             f"{100 * LEARN_MARGIN:g} points above the best constant prediction and every seed above it; overfits = "
             f"in more than half the seeds, dev loss ends {100 * OVERFIT_RISE:g}% above its lowest while train loss "
             "ends below its value there", "",
             "| task | constant prediction | fine-tuning: mean, lowest seed | learns | overfitting seeds | verdict |",
             "|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no", None: "–"}
    for task, g in regimes.items():
        t = data.get_task(task)
        lines.append(f"| {t.name} ({t.metrics[0]}) | {num(g['baseline'])} | {num(g['mean'])}, {num(g['min'])} "
                     f"(n={g['n']}) | {yes[g['learns']]} | {g['overfit_seeds']} of {g['n']} | {g['verdict']} |")
    head = ["| task | method | mean ± sd | minus fine-tuning [95% CI] | wins/ties/losses | seeds to resolve |",
            "|---|---|---|---|---|---|"]

    def row(r):
        where = data.get_task(r["task"]).name + (" dev" if r["evaluated_on"] == r["task"] else
                                                 f" → {data.get_task(r['evaluated_on']).name} test")
        cells = [f"{num(r['mean'])} ± {num(r['sd'])} (n={r['seeds']})", "", "", ""]
        if "diff_mean" in r:
            cells[1:] = [f"{num(r['diff_mean'], sign='+')} [{num(r['diff_ci_low'], sign='+')}, "
                         f"{num(r['diff_ci_high'], sign='+')}]",
                         f"{r['diff_wins']}/{r['diff_ties']}/{r['diff_losses']} of {r['diff_n']}", resolve(r)]
        return f"| {where} ({r['metric']}) | {arm_label(r)} | " + " | ".join(cells) + " |"
    evidence = [r for r in summary if r["regime"] == "informative"]
    rest = [r for r in summary if r["regime"] != "informative"]
    lines += ["", "Evidence: tasks where fine-tuning learns and overfits. Dev at the best holdout epoch; "
              "→ PAWS test: the same weights, out of distribution", ""]
    lines += head + [row(r) for r in evidence] if evidence else ["(no task has passed the regime check)"]
    for name, shares in (constant or {}).items():
        lines += ["", f"{data.get_task(name).name} test, the accuracy of one answer everywhere: "
                  + ", ".join(f"always {label}: {num(v)}" for label, v in shares.items())]
    if rest:
        lines += ["", "Not informative at this scale (fine-tuning did not both learn and overfit, or has not "
                  "finished): no evidence for or against AD-DROP", ""] + head + [row(r) for r in rest]
    lines += ["", "dev loss per epoch, mean over seeds (fine-tuning), and the paired difference from fine-tuning "
              "(the other arms; below 0: lower dev loss), over the seeds that reached the epoch (– where no "
              "fine-tuning seed did); last column: dev - train loss at the last epoch",
              "", "| task | method | dev loss by epoch | dev - train loss |", "|---|---|---|---|"]
    by = {}
    for e in epochs:
        by.setdefault((e["task"], e["method"]), []).append(e)
    for (task, method), es in by.items():
        ft = method == "fine-tuning"
        curve = " ".join(num(e["dev_loss"] if ft else e["dev_loss_minus_ft"], 1, "" if ft else "+", ".3f")
                         for e in es)  # –: no fine-tuning seed reached that epoch
        lines.append(f"| {data.get_task(task).name} | {method} | {curve} | {es[-1]['gap']:.3f} |")
    return lines


def figure_columns(done, epochs, regimes):
    """One figure column per task and per out-of-distribution set: the paired differences of each arm from
    fine-tuning (points), and for dev the mean dev loss per epoch per arm."""
    columns = []
    for task, by_method in done.items():
        for evaluated_on, score in [(task, dev_score)] + ([(OOD[task], ood_score)] if task in OOD else []):
            ft = {s: v for s, res in by_method.get("fine-tuning", {}).items() if (v := score(res)) is not None}
            diffs = {}
            for method, by_seed in by_method.items():
                if method != "fine-tuning":
                    vals = {s: v for s, res in by_seed.items() if (v := score(res)) is not None}
                    diffs[method] = [vals[s] - ft[s] for s in sorted(set(vals) & set(ft))]
            t, e = data.get_task(task), data.get_task(evaluated_on)
            ood = evaluated_on != task
            columns.append({
                "title": (f"{t.name}-trained, {e.name} test" if ood else f"{t.name} dev") + f": {len(ft)} seeds"
                         + ("" if regimes[task]["informative"] else "\nnot informative at this scale"),
                "ylabel": f"{e.metrics[0]} minus fine-tuning\n(points, same seed)", "diffs": diffs,
                "informative": bool(regimes[task]["informative"]),
                "losses": None if ood else {m: [(x["epoch"], x["dev_loss"]) for x in epochs
                                                if x["task"] == task and x["method"] == m] for m in by_method}})
    return columns


def compare_figure(columns, path):
    """Per column on top the paired differences from fine-tuning, a dot per seed, the mean with its 95% interval,
    and the zero line (greyed where the task is not informative at this scale); below, mean dev loss per epoch."""
    plt, fig, axes = plt_figure(2, max(len(columns), 1), figsize=(max(3.8 * len(columns), 5), 6.8), squeeze=False)
    rng = np.random.default_rng(0)
    for col, c in enumerate(columns):
        ax, ax2 = axes[0, col], axes[1, col]
        methods = list(c["diffs"])
        for x, method in enumerate(methods):
            d = 100 * np.array(c["diffs"][method])
            ax.scatter(x + rng.uniform(-0.1, 0.1, len(d)), d, s=16, alpha=0.6 if c["informative"] else 0.25,
                       color=f"C{list(ARMS).index(method)}")
            if len(d) > 1:
                s = paired_summary(d)
                ax.errorbar(x + 0.25, s["mean"], yerr=[[s["mean"] - s["ci_low"]], [s["ci_high"] - s["mean"]]],
                            fmt="o", color="k" if c["informative"] else "0.6", capsize=3, ms=4,
                            label="mean, 95% CI" if x == 0 else None)
        ax.axhline(0, color="gray", lw=1, ls="--", label="no difference")
        ax.set_xticks(range(len(methods)), methods, fontsize=8)
        ax.set_xlim(-0.5, max(len(methods), 1) - 0.3)
        ax.set_title(c["title"], fontsize=9, color="k" if c["informative"] else "firebrick")
        ax.set_ylabel(c["ylabel"], fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        if c["losses"] is None:
            ax2.axis("off")
            ax2.text(0.5, 0.5, "scored once, with the weights\nof the best holdout epoch", ha="center",
                     va="center", fontsize=8, color="gray", transform=ax2.transAxes)
            continue
        for method, points in c["losses"].items():
            ax2.plot([e for e, _ in points], [v for _, v in points], marker="o", ms=3, label=method,
                     color="k" if method == "fine-tuning" else f"C{list(ARMS).index(method)}")
        ax2.set(xlabel="epoch", ylabel="mean dev loss" if col == 0 else None)
        ax2.xaxis.get_major_locator().set_params(integer=True)
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7)
    axes[0, 0].legend(fontsize=8, loc="lower left")
    fig.suptitle("each arm minus plain fine-tuning on the same seed, at the best holdout epoch (top);\n"
                 "mean dev loss per epoch (bottom)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)

# -----------------------------------------------------------------------------
# the command line: every bad value refused by its flag's name, in one line

class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line; the usage is what --help is for
        self.exit(2, f"{self.prog}: error: {message}\n")


def checked(kind, ok, what):
    """An argparse type: kind(s), refused unless ok(value), with the message 'must be WHAT'."""
    def parse(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r}: not a number") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{s!r}: must be {what}")
        return v
    return parse


def list_of(item):
    return lambda s: [item(v) for v in s.split(",")]


def task_name(s):
    t = s.lower().replace("-", "")
    if t not in train.SETTINGS:
        raise argparse.ArgumentTypeError(f"{s!r}: unknown task; choose from {', '.join(train.SETTINGS)}")
    return t


def shard(s):
    try:
        k, n = (int(v) for v in s.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: write K/N, e.g. 2/8 for the second of 8 shards") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{s!r}: K must be from 1 to N")
    return k, n


POSITIVE = checked(int, lambda v: v >= 1, "at least 1")
SHOTS = lambda s: s if s == "full" else POSITIVE(s)
FRACTION = checked(float, lambda v: 0 <= v <= 1, "in [0, 1]")
ANALYSES = {"prior": (plan_prior, report_prior), "grid": (plan_grid, report_grid),
            "seeds": (plan_seeds, report_seeds), "figure1": (plan_figure1, report_figure1),
            "compare": (plan_compare, report_compare),
            "compare_small": (lambda args: plan_compare(args, "compare_small"), report_compare)}


def arm_key(s):
    if s not in ARM_NAMES:
        raise argparse.ArgumentTypeError(f"{s!r}: unknown arm; choose from {', '.join(ARM_NAMES)}")
    return s


def parse_args(argv=None):
    """The command line, every value checked, nothing run."""
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("analysis", choices=(*ANALYSES, "all"))
    ap.add_argument("--scale", choices=tuple(PRESETS), default="cpu",
                    help="the miniature, the paper's scale, or (compare only) MiniLM on full data on a GPU")
    ap.add_argument("--out", default="runs/exp", help="figures, tables and one folder per run go here")
    ap.add_argument("--shard", type=shard, default=None, help="K/N: train only the K-th of N disjoint slices of the runs")
    ap.add_argument("--tables-only", action="store_true",
                    help="train nothing: the tables and figures from the runs finished so far (safe while shards run)")
    ap.add_argument("--data-dir", default=None, help="GLUE folder (default: $GLUE_DIR, else data/glue)")
    ap.add_argument("--weights", default=None, help="weights (default: MiniLM for cpu and gpu-minilm, roberta-base for gpu)")
    ap.add_argument("--device", default=None, help="cpu, cuda ... (default: cuda when available)")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default=None, help="train.py --dtype (default: fp32)")
    ap.add_argument("--task", dest="tasks", type=list_of(task_name), default=None,
                    help="override the preset task (compare: a list, e.g. rte,mrpc)")
    ap.add_argument("--epochs", type=POSITIVE, default=None)
    ap.add_argument("--patience", type=POSITIVE, default=None, help="epochs without a better selection metric")
    ap.add_argument("--limit", type=POSITIVE, default=None,
                    help="N training examples: a stratified sample drawn by the seed (train.py --limit)")
    ap.add_argument("--methods", type=list_of(arm_key), default=None,
                    help=f"compare: the arms, e.g. ft,ga,rdrop (of {', '.join(ARM_NAMES)}; default: the preset's)")
    ap.add_argument("--max-len", type=POSITIVE, default=None)
    ap.add_argument("--lr", type=checked(float, lambda v: 0 < v < math.inf, "positive"), default=None)
    ap.add_argument("--batch-size", type=POSITIVE, default=None)
    ap.add_argument("--holdout", type=checked(float, lambda v: 0 < v < 1, "strictly between 0 and 1"), default=None,
                    help="compare: the fraction of the training set that picks the best epoch")
    ap.add_argument("--seed", type=checked(int, lambda v: v >= 0, "at least 0"), default=0,
                    help="seed of the prior, grid and figure1 runs")
    ap.add_argument("--values", type=list_of(FRACTION), default=None, help="grid values of p and q, e.g. 0.1,0.5,0.9")
    ap.add_argument("--seeds", type=POSITIVE, default=None, help="seeds, compare: repeat each setting N times (seeds 0..N-1)")
    ap.add_argument("--shots", type=list_of(SHOTS), default=None, help="seeds: K per class, e.g. 16,64,256 or full")
    ap.add_argument("--p", type=FRACTION, default=None, help="seeds/figure1/compare: p (default: the paper's Table 4)")
    ap.add_argument("--q", type=FRACTION, default=None, help="seeds/figure1/compare: q (default: the paper's Table 4)")
    ap.add_argument("--checkpoint", default=None, help="figure1: a fine-tuned model folder (default: train one)")
    ap.add_argument("--head", type=checked(int, lambda v: v >= 0, "at least 0"), default=0,
                    help="figure1: which head of the first layer (from 0)")
    ap.add_argument("--dev-limit", type=checked(int, lambda v: v >= 0, "at least 0"), default=None,
                    help="score on N dev examples, a stratified sample drawn by the seed (0: all)")
    ap.add_argument("--threads", type=POSITIVE, default=None, help="torch CPU threads (1 is faster on a busy machine)")
    args = ap.parse_args(argv)
    names = ["prior", "grid", "seeds", "figure1"] if args.analysis == "all" else [args.analysis]
    if args.tasks and len(args.tasks) > 1 and not names[0].startswith("compare"):
        ap.error(f"argument --task: {args.analysis} takes one task, not {len(args.tasks)}")
    for name in names:
        if name not in PRESETS[args.scale]:
            ap.error(f"argument --scale: {args.scale} has no {name} preset; it has "
                     f"{', '.join(k for k in PRESETS[args.scale] if k != 'weights')}")
    if args.methods and not names[0].startswith("compare"):
        ap.error(f"argument --methods: only compare has arms, not {args.analysis}")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        ap.error(f"argument --out: {args.out} is a file; pass a folder (it is created if missing)")
    return args


def main(argv=None):
    args = parse_args(argv)
    names = ["prior", "grid", "seeds", "figure1"] if args.analysis == "all" else [args.analysis]
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model_config(args)  # every check before any training
        plans = {name: ANALYSES[name][0](args) for name in names}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for name, (base, runs) in plans.items():
            t0 = time.time()
            print(f"== {name} ({args.scale} scale, {len(runs)} runs) ==", flush=True)
            sweep(args, name, base, runs, ANALYSES[name][1])
            print(f"== {name}: {time.time() - t0:.0f} s wall ==", flush=True)
    except (data.DataError, modeling.WeightsError, modeling.SaveError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()

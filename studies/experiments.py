"""
The studies' command line: the paper's analyses in miniature (prior, grid, seeds, figure1), compare, does
AD-DROP help, and the preregistered confirmatory study (ner_pilot, then confirm; preregistration.md), each a
sweep of train.run() calls with its tables and figures. How to run them, what each preset costs, sharding and
resuming: README.md in this folder.

    python studies/experiments.py compare --threads 1 --out runs/cpu     # GLUE from $GLUE_DIR, or --data-dir DATA
"""

import argparse
import math
import shlex
import sys
import time
from pathlib import Path

# run as `python studies/experiments.py`: the core (train.py, data.py, ...) is the folder above this one
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from support import cpu
cpu.fair_share()  # before torch loads OpenMP: passive waiting on a busy CPU, else a short spin (cpu.py)

import torch

from support import checkpoint
import compare
import confirm
import data
import fewshot
import paper
from support import settings
from support import state
from sweep import model_config, setting, sweep, tasks


# The confirmatory study's NER runs (preregistration.md, "Settings"), the pilot's and confirm's: the default model's
# CoNLL-2003 row (settings.py: lr 5e-5, batch 32, max length 256), a seeded random subset of N training sentences
# (N: the pilot's sizes, or the one the pilot picked), 20% of it held out to pick the epoch; up to 20 epochs,
# patience 4; dev scored each epoch on a seeded 1000 of its 3,250 sentences (for time: it only describes the run);
# the full dev and test sets scored once, with the held-out-best epoch's weights (--predict).
NER = dict(epochs=20, patience=4, lr=5e-5, holdout=0.2, max_len=None, batch_size=None, dev_limit=1000,
           group_by_length=True, predict=True)

# the miniature (cpu), the paper's scale (gpu), and compare with MiniLM on full data (gpu-minilm); None means
# train.py's default (Table 4). compare's "tasks" maps each task to its own overrides of the analysis-wide values
# beside it, its "methods" are the keys of compare.ARMS (the arms); limit_first: --limit and --dev-limit take the
# first N rows instead of a stratified sample drawn by the seed.
PRESETS = {
    "cpu": {
        "weights": None,  # all-MiniLM-L6-v2
        "prior":   dict(task="mrpc", limit=240, max_len=64, epochs=5, lr=1e-4),
        "grid":    dict(task="sst2", limit=160, max_len=64, epochs=3, lr=1e-4, dev_limit=400,
                        values=[0.1, 0.5, 0.9]),
        "seeds":   dict(task="sst2", shots=[16, 64], seeds=3, max_len=64, epochs=6, lr=1e-4, dev_limit=400),
        "figure1": dict(task="sst2", limit=192, max_len=64, epochs=2, lr=1e-4),
        # compare, fixed before any of its runs: a regime where fine-tuning learns and overfits.
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
        # full dev set scored: SST-2 57 s, MRPC 88 s, of which training is ~84% and ~88% (the
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
        # the compare of the README's first table, kept to reproduce it (too small to answer: only SST-2 learns):
        # lr 1e-4 as in the other miniatures, 4 epochs (two plain, two AD-DROP), a quarter of each subset held out
        # for selection, the first 200 examples per task so that 4 arms x 5 seeds x 3 tasks fit in 2 hours
        "compare_small": dict(seeds=5, epochs=4, patience=4, lr=1e-4, holdout=0.25, max_len=64, limit=200,
                              dev_limit=200, limit_first=True, tasks={"sst2": {}, "stsb": {}, "rte": {}},
                              methods=["ft", "ga", "rd", "aa"]),
        # the confirmatory study, preregistration.md: first the NER pilot (fine-tuning on seeds 900 and 901 at
        # three subset sizes; confirm.pilot_rule picks N), then confirm: SST-2 with the cpu compare's settings
        # unchanged, seeds 100-123, 4 arms (about 1.6 h as two shards, by the compare's times), then NER at N,
        # seeds 100-115, 2 arms. Arms are cut before seeds (--methods; RD first).
        "ner_pilot": dict(task="conll2003", first_seed=900, seeds=2, sizes=[500, 1000, 2000], **NER),
        "confirm": dict(first_seed=100, methods=["ft", "ga", "gatrain", "rd"], tasks={
            "sst2": dict(seeds=24, epochs=10, patience=3, lr=3e-5, holdout=0.2, max_len=None, limit=1000,
                         dev_limit=None, group_by_length=True),
            "conll2003": dict(seeds=16, methods=["ft", "ga"], limit=None, **NER)}),
        # the few-shot study, preregistration_fewshot.md: first its pilot (fine-tuning only, seeds 950-953, both
        # learning rates, each run to the larger step budget; fewshot.pilot_rule picks lr, the budget, CoLA's rows
        # and the seeds), then fewshot: seeds from 200, SST-2 at 16, 64 and 256 examples per class (arms
        # fine-tuning, GA, RD), CoLA at 64 and 256 where the pilot kept it (fine-tuning, GA). Batch 8, Table 4's
        # max length (nothing cut, batches grouped by length), Table 4's p and q for BERT (SST-2 0.6/0.8 in the
        # first layer, CoLA 0.3/0.4 in all), the full dev sets scored once per run.
        "fewshot_pilot": dict(first_seed=950, seeds=4, lrs=[3e-5, 1e-4], budgets=[256, 512], batch_size=8,
                              max_len=None, group_by_length=True, dev_limit=None,
                              tasks={"sst2": dict(shots=[16, 64, 256]), "cola": dict(shots=[64, 256])}),
        "fewshot": dict(first_seed=200, seeds=48, batch_size=8, max_len=None, group_by_length=True, dev_limit=None,
                        tasks={"sst2": dict(shots=[16, 64, 256], methods=["ft", "ga", "rd"]),
                               "cola": dict(shots=[64, 256], methods=["ft", "ga"])}),
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

ANALYSES = {"prior": (paper.plan_prior, paper.report_prior), "grid": (paper.plan_grid, paper.report_grid),
            "seeds": (paper.plan_seeds, paper.report_seeds), "figure1": (paper.plan_figure1, paper.report_figure1),
            "compare": (compare.plan_compare, compare.report_compare),
            "compare_small": (lambda args: compare.plan_compare(args, "compare_small"), compare.report_compare),
            "ner_pilot": (confirm.plan_pilot, confirm.report_pilot),
            "confirm": (confirm.plan_confirm, confirm.report_confirm),
            "fewshot_pilot": (fewshot.plan_pilot, fewshot.report_pilot),
            "fewshot": (fewshot.plan_fewshot, fewshot.report_fewshot)}
PAPER = ["prior", "grid", "seeds", "figure1"]  # what `all` runs
REPEATED = ("seeds", "compare", "compare_small", "ner_pilot", "confirm", "fewshot_pilot", "fewshot")  # they repeat settings over --seeds seeds
ARMED = ("compare", "compare_small", "confirm", "fewshot")  # the analyses with arms (--methods)
STUDY = ("ner_pilot", "confirm", "fewshot_pilot", "fewshot")  # the preregistered studies: their tasks are fixed

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
    if t not in settings.SETTINGS:
        raise argparse.ArgumentTypeError(f"{s!r}: unknown task; choose from {', '.join(settings.SETTINGS)}")
    return t


def shard(s):
    try:
        k, n = (int(v) for v in s.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: write K/N, e.g. 2/8 for the second of 8 shards") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{s!r}: K must be from 1 to N")
    return k, n


def arm_key(s):
    if s not in compare.ARM_NAMES:
        raise argparse.ArgumentTypeError(f"{s!r}: unknown arm; choose from {', '.join(compare.ARM_NAMES)}")
    return s


POSITIVE = checked(int, lambda v: v >= 1, "at least 1")
NATURAL = checked(int, lambda v: v >= 0, "at least 0")
SHOTS = lambda s: s if s == "full" else POSITIVE(s)
FRACTION = checked(float, lambda v: 0 <= v <= 1, "in [0, 1]")


def parser():
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
                    help="N training examples: a stratified sample drawn by the seed (train.py --limit); "
                         "confirm: SST-2's; ner_pilot: the one size N instead of the preset's")
    ap.add_argument("--ner-limit", type=POSITIVE, default=None,
                    help="confirm: N, the NER runs' training sentences (default: what ner_pilot picked in --out)")
    ap.add_argument("--ner-seeds", type=POSITIVE, default=None,
                    help="confirm: the NER runs' seeds, from --first-seed on (default 16; --seeds: SST-2's)")
    ap.add_argument("--methods", type=list_of(arm_key), default=None,
                    help=f"compare: the arms, e.g. ft,ga,rdrop (of {', '.join(compare.ARM_NAMES)}; default: the preset's)")
    ap.add_argument("--max-len", type=POSITIVE, default=None)
    ap.add_argument("--lr", type=checked(float, lambda v: 0 < v < math.inf, "positive"), default=None)
    ap.add_argument("--batch-size", type=POSITIVE, default=None)
    ap.add_argument("--holdout", type=checked(float, lambda v: 0 < v < 1, "strictly between 0 and 1"), default=None,
                    help="compare: the fraction of the training set that picks the best epoch")
    ap.add_argument("--seed", type=NATURAL, default=0, help="seed of the prior, grid and figure1 runs")
    ap.add_argument("--values", type=list_of(FRACTION), default=None, help="grid values of p and q, e.g. 0.1,0.5,0.9")
    ap.add_argument("--seeds", type=POSITIVE, default=None,
                    help="seeds, compare: repeat each setting N times, seeds F..F+N-1 (F: --first-seed)")
    ap.add_argument("--first-seed", type=NATURAL, default=None,
                    help="seeds, compare, ner_pilot, confirm: the first seed F of the range (default 0; ner_pilot "
                         "900, confirm 100); other seeds' runs in --out are not counted")
    ap.add_argument("--shots", type=list_of(SHOTS), default=None, help="seeds: K per class, e.g. 16,64,256 or full")
    ap.add_argument("--p", type=FRACTION, default=None, help="seeds/figure1/compare: p (default: the paper's Table 4)")
    ap.add_argument("--q", type=FRACTION, default=None, help="seeds/figure1/compare: q (default: the paper's Table 4)")
    ap.add_argument("--checkpoint", default=None, help="figure1: a fine-tuned model folder (default: train one)")
    ap.add_argument("--head", type=NATURAL, default=0, help="figure1: which head of the first layer (from 0)")
    ap.add_argument("--dev-limit", type=NATURAL, default=None,
                    help="score on N dev examples, a stratified sample drawn by the seed (0: all)")
    ap.add_argument("--threads", type=POSITIVE, default=None, help="torch CPU threads (1 is faster on a busy machine)")
    return ap


def parse_args(argv=None):
    """The command line, every value checked, nothing run. args.preset: the presets of --scale, which the
    plans and reports read where no flag overrides them."""
    ap = parser()
    args = ap.parse_args(argv)
    names = PAPER if args.analysis == "all" else [args.analysis]
    if args.tasks and names[0] in STUDY:
        ap.error(f"argument --task: {args.analysis} runs the tasks its preregistration fixes")
    if args.tasks and len(args.tasks) > 1 and not names[0].startswith("compare"):
        ap.error(f"argument --task: {args.analysis} takes one task, not {len(args.tasks)}")
    for flag in ("ner_limit", "ner_seeds"):
        if getattr(args, flag) and names[0] != "confirm":
            ap.error(f"argument --{flag.replace('_', '-')}: only confirm runs NER at a chosen size and seeds")
    for name in names:
        if name not in PRESETS[args.scale]:
            ap.error(f"argument --scale: {args.scale} has no {name} preset; it has "
                     f"{', '.join(k for k in PRESETS[args.scale] if k != 'weights')}")
    if args.methods and names[0] not in ARMED:
        ap.error(f"argument --methods: only compare and confirm have arms, not {args.analysis}")
    if args.first_seed is not None and not any(name in REPEATED for name in names):
        ap.error(f"argument --first-seed: {args.analysis} runs one seed (--seed), not a range")
    args.preset = PRESETS[args.scale]
    args.task_flags = {"conll2003": {"seeds": args.ner_seeds}}  # confirm's NER seeds (sweep.setting)
    for name in (n for n in names if n in REPEATED):
        for task in tasks(args, name):
            first = setting(args, name, "first_seed", task) or 0
            last = first + setting(args, name, "seeds", task) - 1
            if last >= 2**32:  # train.py takes seeds in [0, 2**32)
                ap.error(f"argument --first-seed: seeds {first} to {last} go past 2**32 - 1, the largest "
                         "seed train.py takes")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        ap.error(f"argument --out: {args.out} is a file; pass a folder (it is created if missing)")
    return args


def main(argv=None):
    args = parse_args(argv)
    names = PAPER if args.analysis == "all" else [args.analysis]
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
    except (data.DataError, checkpoint.WeightsError, checkpoint.SaveError) as e:
        sys.exit(f"error: {e}")
    except state.Stopped as e:  # a run in progress saved its state first: the same command resumes it
        print(f"\n{e.message.splitlines()[0].split(':')[0]}; rerun the same command to resume:\n    "
              f"{shlex.join(['python'] + sys.argv)}", file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    main()

"""
The paper's settings and train.py's command line: Table 4's hyperparameters per task and model type (and the
default model's own row), every flag with its help, and the checks that refuse a bad value in one line naming
the flag, before any work starts.
"""

import argparse
import math
import platform
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import torch

import addrop
import impl
from support import cpu
import data
from support import state

# Table 4 of the paper, per task and model type: lr, batch size, max length, and the p, q it picked
def _t4(lr, bs, ml, p, q):
    return dict(lr=lr, batch_size=bs, max_len=ml, p=p, q=q)
SETTINGS = {
    "sst2": {"bert": _t4(1e-5, 16, 120, 0.6, 0.8), "roberta": _t4(1e-5, 64, 120, 0.3, 0.7)},
    "mnli": {"bert": _t4(1e-5, 16, 128, 0.5, 0.9), "roberta": _t4(1e-5, 32, 128, 0.4, 0.2)},
    "qnli": {"bert": _t4(1e-5, 16, 128, 0.8, 0.8), "roberta": _t4(1e-5, 16, 128, 0.8, 0.4)},
    "qqp":  {"bert": _t4(1e-5, 16, 120, 0.2, 0.7), "roberta": _t4(1e-5, 16, 120, 0.7, 0.9)},
    "cola": {"bert": _t4(1e-5, 16, 47, 0.3, 0.4),  "roberta": _t4(2e-5, 16, 47, 0.8, 0.3)},
    "stsb": {"bert": _t4(1e-5, 16, 100, 0.9, 0.7), "roberta": _t4(2e-5, 16, 100, 0.1, 0.5)},
    "mrpc": {"bert": _t4(1e-5, 16, 100, 0.5, 0.8), "roberta": _t4(2e-5, 16, 100, 0.8, 0.3)},
    "rte":  {"bert": _t4(1e-5, 16, 128, 0.6, 0.7), "roberta": _t4(1e-5, 16, 128, 0.7, 0.1)},
}
SETTINGS["wnli"] = dict(SETTINGS["rte"])  # the paper has no WNLI row: RTE's, the other small entailment task
# The default model, all-MiniLM-L6-v2 (6 layers, 384 wide), is not base-sized: at Table 4's lr 1e-5 it barely
# moves in a few epochs. Its own row, used when --weights is not given: lr and epochs picked on held-out training
# data (--holdout 0.1) of SST-2 and RTE with plain fine-tuning, over lr 1e-5, 3e-5, 1e-4 (RESULTS.md, "Defaults for the
# default model"); batch size, max length, p and q stay Table 4's BERT values.
MINILM = dict(lr=3e-5, epochs=3)
for row in SETTINGS.values():
    row["minilm"] = {**row["bert"], **MINILM}
# CoNLL-2003 NER (Appendix A.2): the paper gives no settings. These are its authors' NER script's (ner/main.py:
# ELECTRA-base, batch 32, lr 2e-5, 9 epochs, candidate fraction 0.8, keep rate 0.9, i.e. p = 0.8, q = 0.1),
# for every model type; max length 256 covers the longest sentence in sub-tokens (164, train). The default
# model's row: lr 5e-5 (MiniLM is small; fixed before any NER run, not tuned) and 4 epochs, two of each kind.
NER = _t4(2e-5, 32, 256, 0.8, 0.1)
SETTINGS["conll2003"] = {"bert": NER, "roberta": NER, "electra": {**NER, "epochs": 9},
                         "minilm": {**NER, "lr": 5e-5, "epochs": 4}}
# Section 3.2: AD-DROP in the first layer on the large, stable tasks, in all layers on the rest
FIRST_LAYER_TASKS = ("sst2", "mnli", "qnli", "qqp", "stsb")
# flags that may differ between a run and its --resume without changing what is trained (device, threads and
# compile change how: other kernels and random draws, so the resumed run is no longer equal to the bit)
RESUME_FREE = ("out", "resume", "log_interval", "threads", "data_dir", "device", "epochs", "no_checkpoint", "predict",
               "save_every", "no_epoch_state", "compile")


def parse_args(argv=None, description=None):
    """train.py's flags, checked (description: train.py's docstring, for --help), in --help's groups."""
    ap = argparse.ArgumentParser(prog="train.py", description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for flags in (task_flags, training_flags, addrop_flags, machine_flags, output_flags, study_flags):
        flags(ap.add_argument_group(flags.__doc__))
    args = ap.parse_args(argv)
    check_args(args, ap.error)
    return args


def task_flags(ap):
    """what to train, on what: the task, weights and data, and their subsets"""
    ap.add_argument("--task", default="rte", help="GLUE task, or conll2003 (NER), default rte: " + ", ".join(SETTINGS))
    ap.add_argument("--weights", default=None, help="weights folder, or a name under weights/ (default: all-MiniLM-L6-v2)")
    ap.add_argument("--data-dir", default=None, help="GLUE folder (default: $GLUE_DIR, else data/glue); CoNLL-2003 "
                    "and PAWS are read from its conll2003/ and paws/, or from those folders beside it")
    ap.add_argument("--limit", type=int, default=None, help="train on a random sample of N training examples, "
                    "stratified by class and fixed by --seed (every method under one seed sees the same sample)")
    ap.add_argument("--dev-limit", type=int, default=None, help="score on a random, stratified sample of N dev examples")
    ap.add_argument("--limit-first", action="store_true", help="--limit and --dev-limit take the FIRST N rows instead "
                    "(compare_small's runs are made so; GLUE files are ordered, so this is no sample)")
    ap.add_argument("--holdout", type=float, default=None,
                    help="set aside this stratified fraction of the training set to pick the best epoch; dev is then only reported")
    ap.add_argument("--shots", type=int, default=None, help="few-shot: K training examples per class")
    ap.add_argument("--ood", default=None, help="paws: also score the best epoch's weights on PAWS-Wiki test "
                    "(out of distribution, for --task mrpc or qqp)")


def training_flags(ap):
    """how to train: Table 4's settings and the loop's own"""
    ap.add_argument("--epochs", type=int, default=None,
                    help="at most this many epochs (default: 4, or the default model's row; the paper: 20-50 with early stopping)")
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default: Table 4, or the default model's row)")
    ap.add_argument("--batch-size", type=int, default=None, help="global batch size, split over torchrun's processes (default: Table 4)")
    ap.add_argument("--max-len", type=int, default=None, help="max tokens per example (default: Table 4; at most the model's position table)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the init of fresh weights, shuffling, the holdout split, dropout and masks")
    ap.add_argument("--patience", type=int, default=5, help="stop after this many epochs without a better selection metric")
    ap.add_argument("--warmup", type=float, default=0.0, help="fraction of steps of linear lr warm-up (the paper: none)")
    ap.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay, not on biases and LayerNorm")
    ap.add_argument("--dtype", default="fp32", help="fp32, or bf16: forwards and backwards under autocast (weights stay fp32)")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many training steps (smoke runs)")
    ap.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, default=None,
                    help="batches of similar lengths, in a seeded order (less padding; default: on for conll2003)")
    ap.add_argument("--rdrop", type=float, default=0.0, help="R-Drop: two forwards with their own dropout; the "
                    "mean of their losses plus ALPHA times their symmetric KL (0: off). The R-Drop paper sums the "
                    "two losses, so its alpha is twice this one")
    ap.add_argument("--impl", action="append", default=[], metavar="FILE", help="train with a student's exercise "
                    "file (exercises/NN_name.py) in place of its function, or --impl exercises for all; repeatable")


def addrop_flags(ap):
    """AD-DROP (Section 2, Algorithm 1)"""
    ap.add_argument("--p", type=float, default=0.0, help="candidate region size, Eq. 6 (0: plain fine-tuning)")
    ap.add_argument("--q", type=float, default=0.0, help="drop rate inside the candidate region, Eq. 7")
    ap.add_argument("--attribution", default="ga", help="ga (gradient), iga (integrated gradient), aa (attention), rd (random)")
    ap.add_argument("--labels", default="pseudo", help="attribute the pseudo label (paper) or the gold label")
    ap.add_argument("--layers", default=None, help="first, all, or indices like 0,2 (default: per task, Section 3.2)")
    ap.add_argument("--ig-steps", type=int, default=20, help="m, the steps of integrated gradients, Eq. 3")
    ap.add_argument("--no-cross-tuning", action="store_true", help="AD-DROP in every epoch (Table 2's ablation)")
    ap.add_argument("--mask", default=None, help="the mask of Eq. 6-7: high (the paper's), low (Section 2.2's "
                    "mirror), random (Table 2's RD; the default with --attribution rd); any key of addrop.MASKS")
    ap.add_argument("--drop-low", action="store_true", help="drop LOW-attribution positions instead (--mask low)")
    ap.add_argument("--first-pass", default="eval", help="eval: attribution in eval mode (default); train: the "
                    "authors' code's, dropout on and A taken after attention dropout (ga and aa)")


def machine_flags(ap):
    """where and how fast: device, threads, compilation"""
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 can be faster on a busy machine)")
    ap.add_argument("--compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                    help="run the model through torch.compile (on CUDA with CUDA graphs, mode reduce-overhead), and "
                         "the masks as whole graphs; every batch is padded to --max-len, one static shape. The first "
                         "steps compile (about a minute): short runs lose. BACKEND: torch.compile's (default "
                         "inductor; aot_eager checks the graphs without a C compiler)")


def output_flags(ap):
    """the run folder: outputs, saving and resuming"""
    ap.add_argument("--out", default=None, help="output folder (default: out/TASK)")
    ap.add_argument("--resume", action="store_true", help=f"continue the run in --out from its last saved state ({state.STATE})")
    ap.add_argument("--save-every", type=save_every, default=None, metavar="N or Nm",
                    help="also save the training state inside an epoch: every N steps, or every N minutes (10m); "
                         "a SIGKILL then loses at most that much (SIGTERM and SIGUSR1 always save first)")
    ap.add_argument("--log-interval", type=int, default=20, help="steps between log lines")
    ap.add_argument("--no-checkpoint", action="store_true", help="keep only metrics.json (sweeps)")
    ap.add_argument("--predict", action="store_true", help="at the end, with the best epoch's weights: GLUE's "
                    "submission files (OUT/RTE.tsv, ...), or for conll2003 OUT/dev_predictions.txt and "
                    "OUT/test_predictions.txt (conlleval's input) and their scores")
    ap.add_argument("--no-epoch-state", action="store_true", help="do not write the training state after every "
                    "epoch (runs of many tiny epochs); --save-every and a stop signal still write it")


def study_flags(ap):
    """the few-shot study's selection (studies/fewshot.py)"""
    ap.add_argument("--shots-holdout", action="store_true", help="with --shots K: K other examples per class, drawn "
                    "by --seed, are held out to pick the epoch (LM-BFF's few-shot convention); dev is only reported")
    ap.add_argument("--dev-once", action="store_true", help="score dev once, at the end, with the weights of the "
                    "held-out-best epoch, instead of every epoch (needs --holdout or --shots-holdout)")
    ap.add_argument("--tie-break", choices=("first", "loss"), default="first", help="between epochs with the same "
                    "selection metric: the first one keeps its place (default), or the one with the lower loss on "
                    "the selecting split wins")


class SaveEvery(NamedTuple):
    steps: int       # every this many steps, or
    minutes: float   # every this many minutes


def save_every(s):
    """--save-every: N steps, or N minutes written Nm (10m, 0.5m)."""
    try:
        value = SaveEvery(0, float(s[:-1])) if s.endswith("m") else SaveEvery(int(s), 0.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: a number of steps (500) or of minutes (10m)") from None
    if not (value.steps > 0 or 0 < value.minutes < math.inf):
        raise argparse.ArgumentTypeError(f"{s!r}: must be more than 0 steps or minutes")
    return value


def check_args(args, bad):
    """Refuse bad flag values before any work starts, each in one line naming the flag (bad: argparse's
    error, which prints the usage and exits): the values one by one, how they combine, and --out."""
    args.task = args.task.lower().replace("-", "")
    args.attribution, args.labels, args.dtype = args.attribution.lower(), args.labels.lower(), args.dtype.lower()
    args.ood = args.ood and args.ood.lower()
    _check_values(args, bad)
    _check_combinations(args, bad)
    _check_out(args, bad)


def _check_values(args, bad):
    """Each flag's value alone: a known name, a number in its range."""
    if args.task not in SETTINGS:
        bad(f"--task {args.task!r}: unknown; choose one of {', '.join(SETTINGS)}")
    if not 0 <= args.p <= 1:
        bad(f"--p {args.p}: must be in [0, 1]")
    if not 0 <= args.q <= 1:
        bad(f"--q {args.q}: must be in [0, 1]")
    if args.holdout is not None and not 0 < args.holdout < 1:
        bad(f"--holdout {args.holdout}: must be a fraction strictly between 0 and 1")
    if args.ood is not None and args.ood != "paws":
        bad(f"--ood {args.ood!r}: the one out-of-distribution set is paws")
    if args.first_pass not in addrop.FIRST_PASSES:
        bad(f"--first-pass {args.first_pass!r}: choose eval or train")
    if not 0 <= args.rdrop < math.inf:
        bad(f"--rdrop {args.rdrop}: must be a number at least 0")
    if args.attribution not in addrop.ATTRIBUTIONS:
        bad(f"--attribution {args.attribution!r}: choose one of {', '.join(addrop.ATTRIBUTIONS)}")
    if args.drop_low and args.mask not in (None, "low"):
        bad(f"--drop-low is --mask low: it cannot go with --mask {args.mask}")
    args.mask = args.mask or ("low" if args.drop_low else "random" if args.attribution == "rd" else "high")
    if args.mask not in addrop.MASKS:
        bad(f"--mask {args.mask!r}: choose one of {', '.join(addrop.MASKS)}")
    if args.labels not in ("pseudo", "gold"):
        bad(f"--labels {args.labels!r}: choose pseudo or gold")
    if args.dtype not in ("fp32", "bf16"):
        bad(f"--dtype {args.dtype!r}: choose fp32 or bf16")
    if args.compile is not None:
        import torch._dynamo  # here, not above: loading it takes a second that other runs need not wait
        if args.compile not in torch._dynamo.list_backends(exclude_tags=()):
            bad(f"--compile {args.compile!r}: not a torch.compile backend; use inductor (the default) or aot_eager")
    if args.ig_steps < 1:
        bad(f"--ig-steps {args.ig_steps}: must be at least 1")
    for flag in ("epochs", "batch_size", "max_len", "max_steps", "limit", "dev_limit", "shots", "log_interval", "threads"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            bad(f"--{flag.replace('_', '-')} {v}: must be at least 1")
    if args.lr is not None and not 0 < args.lr < math.inf:
        bad(f"--lr {args.lr}: must be a positive number")
    if not 0 <= args.weight_decay < math.inf:
        bad(f"--weight-decay {args.weight_decay}: must be a number at least 0")
    if not 0 <= args.seed < 2**32:  # data.batches seeds its shuffle with seed * 1_000_003 + epoch, a 64-bit integer
        bad(f"--seed {args.seed}: must be in [0, 2**32)")
    if not 0 <= args.warmup <= 1:
        bad(f"--warmup {args.warmup}: must be a fraction in [0, 1]")
    if args.patience < 1:
        bad(f"--patience {args.patience}: must be at least 1")


def _check_combinations(args, bad):
    """Flags that need, or exclude, another."""
    if args.first_pass == "train" and args.attribution not in ("ga", "aa"):
        bad(f"--first-pass train: offered for --attribution ga and aa only, not {args.attribution}")
    if args.ood and args.task not in ("mrpc", "qqp"):
        bad(f"--ood paws: PAWS is paraphrase identification; use it with --task mrpc or qqp, not {args.task}")
    if args.shots_holdout and not args.shots:
        bad("--shots-holdout: holds out K examples per class of a --shots K run; pass --shots K")
    if args.shots and args.limit:
        bad(f"--shots {args.shots} and --limit {args.limit}: both choose the training examples (K per class, or N "
            "in all); pass one")
    if args.shots_holdout and args.holdout:
        bad("--shots-holdout and --holdout: choose one way to hold out the examples that pick the epoch")
    if args.dev_once and not (args.holdout or args.shots_holdout):
        bad("--dev-once: dev must not pick the epoch it is scored at; pass --holdout F or --shots K --shots-holdout")
    if args.shots and args.task in data.TASKS and data.TASKS[args.task].token_level:
        bad(f"--shots: few-shot sampling draws K examples per class; {args.task} labels tokens, not sentences")
    if args.shots and args.task in data.TASKS and data.TASKS[args.task].labels is None:
        bad(f"--shots: few-shot sampling draws K examples per class; {args.task} is a regression task, with no classes")
    if args.labels == "gold" and args.attribution in ("aa", "rd"):
        bad(f"--labels gold: --attribution {args.attribution} attributes no label (attention weights or random)")


def _check_out(args, bad):
    """--out: a folder, or a path where one can be made."""
    out = Path(args.out or f"out/{args.task}")
    flag = f"--out {args.out}" if args.out is not None else f"the default --out {out}"
    if out.exists() and not out.is_dir():
        bad(f"{flag}: is a file; pass a folder (it is created if missing)")
    for parent in out.parents:  # nearest first; under a file, mkdir would fail with NotADirectoryError
        if parent.exists() and not parent.is_dir():
            bad(f"{flag}: {parent} is a file, so no folder can be made under it; pass another --out")


def parse_layers(spec, L):
    """--layers: 'first' -> [0]; 'all' -> 0..L-1; '0,3,5' -> [0, 3, 5]. Raises naming a bad index."""
    if spec == "first":
        return [0]
    if spec == "all":
        return list(range(L))
    try:
        layers = sorted({int(s) for s in str(spec).split(",")})
    except ValueError:
        raise ValueError(f"--layers {spec!r}: expected 'first', 'all' or comma-separated indices") from None
    bad = [l for l in layers if not 0 <= l < L]
    if bad:
        raise ValueError(f"--layers {spec!r}: index {bad[0]} out of range for a model with {L} layers (0..{L - 1})")
    return layers


def settings_row(task, weights_arg, model_type):
    """The defaults of SETTINGS for this task: the default model's own row when --weights is not given,
    else the model type's, else (ELECTRA on GLUE, for which the paper gives none) BERT's."""
    rows = SETTINGS[task]
    return rows["minilm" if weights_arg is None else model_type if model_type in rows else "bert"]


def pick_device(arg, local_rank):
    """--device, checked: a torch device name this torch can use. Under torchrun, process
    LOCAL_RANK takes GPU LOCAL_RANK."""
    if arg is None:
        arg = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(arg)
    except RuntimeError:
        sys.exit(f"error: --device {arg!r}: not a device name; use cpu, cuda or cuda:N")
    if device.type not in ("cpu", "cuda"):
        sys.exit(f"error: --device {arg!r}: only cpu and cuda are supported")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = "this torch is built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            sys.exit(f"error: --device {arg}: {why}; use --device cpu")
        index = device.index if device.index is not None else local_rank
        if index >= torch.cuda.device_count():
            sys.exit(f"error: --device {arg}: GPU {index} does not exist ({torch.cuda.device_count()} visible)")
        device = torch.device("cuda", index)
    return device


def code_commit():
    """The git commit of the code, marked -dirty when tracked files differ from it; None outside a checkout."""
    git = lambda *a: subprocess.run(["git", *a], cwd=Path(__file__).parent, capture_output=True, text=True,
                                    timeout=10).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD") or None
        if commit and git("status", "--porcelain", "--untracked-files=no"):
            commit += "-dirty"
        return commit
    except (OSError, subprocess.SubprocessError):
        return None

# read once, when this process imports the code: a sweep that outlives a commit or a `git pull` runs the code
# it imported, so that is the commit its runs record, not the one HEAD points at when each run starts
COMMIT = code_commit()


def describe(j):
    """The run in one line (two with --impl), as train.py prints it before the first step."""
    args = j.args
    sizes = " / ".join(f"{len(s.y)} {name}" for name, s in j.splits.items() if s.y)
    what = "plain fine-tuning" + (f" (--p {args.p} --q {args.q}: AD-DROP needs both above 0)" if args.p or args.q
                                  else "") if not j.use_addrop else (
        f"AD-DROP p={args.p} q={args.q} {args.attribution} layers={j.layers} labels={args.labels}"
        f"{'' if args.mask in ('high', 'random') else ' ' + args.mask}{'' if args.no_cross_tuning else ' with cross-tuning'}"
        f"{' first pass in train mode' if args.first_pass == 'train' else ''}"
        f"{' (epoch 1 is plain: 1 epoch runs no AD-DROP)' if j.epochs < 2 and not args.no_cross_tuning else ''}")
    return ("".join(f"--impl: {impl.named(p)} from {p}\n" for p in args.impl) +
            f"{args.task}: {sizes} examples | {j.weights} | {j.device}"
            f"{f' x {j.world} processes' if j.world > 1 else ''} | {args.dtype} | lr {j.lr} batch {j.batch_size} "
            f"max_len {j.max_len} | {what}{f' + R-Drop --rdrop {args.rdrop}' if args.rdrop else ''}")


def provenance(device, world):
    """What ran this: the same seed on another CPU or torch build is another draw (float sums differ), so
    metrics.json records the machine and build beside the numbers, and the threads and OpenMP settings it ran
    with (cpu.py; None: OpenMP's default) and the load they were chosen by, which a step's time depends on."""
    processor = platform.processor() or platform.machine()
    try:
        processor = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": processor, "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "torch": torch.__version__, "threads": torch.get_num_threads(), "openmp": cpu.openmp(),
            "cpus_busy_at_start": cpu.busy_at_start, "processes": world, "python": platform.python_version(),
            "commit": COMMIT}

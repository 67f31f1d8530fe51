"""
Fine-tune a BERT/RoBERTa encoder on a GLUE task, with or without AD-DROP.

    python train.py --task rte                    # plain fine-tuning
    python train.py --task rte --p 0.7 --q 0.1    # AD-DROP with cross-tuning (Algorithm 1)
    python train.py --task rte --p 0.7 --q 0.1 --holdout 0.1    # select the epoch on held-out train data
    python train.py --task rte --p 0.7 --q 0.1 --resume         # continue the run in --out after a stop
    torchrun --standalone --nproc_per_node=2 train.py --task rte --p 0.7 --q 0.1   # data-parallel

One flat loop, nanoGPT-style: no Trainer, no callbacks. Every epoch is evaluated on dev (and on
the --holdout split, which then picks the best epoch); the best checkpoint is kept in --out as
safetensors (it loads back with model.from_pretrained), with a JSON of the metrics and the
arguments, and the whole training state after every epoch (--resume).
"""

import argparse
import json
import math
import os
import shlex
import shutil
import socket
import sys
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import addrop
import data
import model as modeling

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
# data (--holdout 0.1) of SST-2 and RTE with plain fine-tuning, over lr 1e-5, 3e-5, 1e-4 (README, "Defaults for the
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
# Section 3.1: AD-DROP in the first layer on the large, stable tasks, in all layers on the rest
FIRST_LAYER_TASKS = ("sst2", "mnli", "qnli", "qqp", "stsb")
STATE = "train_state.pt"  # the training state after the last finished epoch, in --out
# flags that may differ between a run and its --resume without changing what is trained
RESUME_FREE = ("out", "resume", "log_interval", "threads", "data_dir", "device", "epochs", "no_checkpoint", "predict")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="rte", help="GLUE task, or conll2003 (NER): " + ", ".join(SETTINGS))
    ap.add_argument("--weights", default=None, help="weights folder, or a name under weights/ (default: all-MiniLM-L6-v2)")
    ap.add_argument("--data-dir", default=None, help="GLUE folder (default: $GLUE_DIR, else data/glue); CoNLL-2003 "
                    "and PAWS are read from its conll2003/ and paws/, or from those folders beside it")
    ap.add_argument("--epochs", type=int, default=None,
                    help="at most this many epochs (default: 4, or the default model's row; the paper: 20-50 with early stopping)")
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default: Table 4, or the default model's row)")
    ap.add_argument("--batch-size", type=int, default=None, help="global batch size, split over torchrun's processes (default: Table 4)")
    ap.add_argument("--max-len", type=int, default=None, help="max tokens per example (default: Table 4; at most the model's position table)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the init of fresh weights, shuffling, the holdout split, dropout and masks")
    ap.add_argument("--holdout", type=float, default=None,
                    help="set aside this stratified fraction of the training set to pick the best epoch; dev is then only reported")
    ap.add_argument("--patience", type=int, default=5, help="stop after this many epochs without a better selection metric")
    ap.add_argument("--warmup", type=float, default=0.0, help="fraction of steps of linear lr warm-up (the paper: none)")
    ap.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay, not on biases and LayerNorm")
    ap.add_argument("--dtype", default="fp32", help="fp32, or bf16: forwards and backwards under autocast (weights stay fp32)")
    ap.add_argument("--out", default=None, help="output folder (default: out/TASK)")
    ap.add_argument("--resume", action="store_true", help=f"continue the run in --out from its last finished epoch ({STATE})")
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many training steps (smoke runs)")
    ap.add_argument("--limit", type=int, default=None, help="train on a random sample of N training examples, "
                    "stratified by class and fixed by --seed (every method under one seed sees the same sample)")
    ap.add_argument("--dev-limit", type=int, default=None, help="score on a random, stratified sample of N dev examples")
    ap.add_argument("--limit-first", action="store_true", help="--limit and --dev-limit take the FIRST N rows instead "
                    "(how runs before the random sample were made; GLUE files are ordered, so this is no sample)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 can be faster on a busy machine)")
    ap.add_argument("--shots", type=int, default=None, help="few-shot: K training examples per class")
    ap.add_argument("--log-interval", type=int, default=20, help="steps between log lines")
    ap.add_argument("--no-checkpoint", action="store_true", help="keep only metrics.json (sweeps)")
    ap.add_argument("--predict", action="store_true", help="at the end, with the best epoch's weights: GLUE's "
                    "submission files (OUT/RTE.tsv, ...), or for conll2003 OUT/dev_predictions.txt and "
                    "OUT/test_predictions.txt (conlleval's input) and their scores")
    ap.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, default=None,
                    help="batches of similar lengths, in a seeded order (less padding; default: on for conll2003)")
    ap.add_argument("--ood", default=None, help="paws: also score the best epoch's weights on PAWS-Wiki test "
                    "(out of distribution, for --task mrpc or qqp)")
    ap.add_argument("--rdrop", type=float, default=0.0, help="R-Drop: two forwards with their own dropout; the "
                    "mean of their losses plus ALPHA times their symmetric KL (0: off). The R-Drop paper sums the "
                    "two losses, so its alpha is twice this one")
    # AD-DROP
    ap.add_argument("--p", type=float, default=0.0, help="candidate region size, Eq. 6 (0: plain fine-tuning)")
    ap.add_argument("--q", type=float, default=0.0, help="drop rate inside the candidate region, Eq. 7")
    ap.add_argument("--attribution", default="ga", help="ga (gradient), iga (integrated gradient), aa (attention), rd (random)")
    ap.add_argument("--labels", default="pseudo", help="attribute the pseudo label (paper) or the gold label")
    ap.add_argument("--layers", default=None, help="first, all, or indices like 0,2 (default: per task, Section 3.1)")
    ap.add_argument("--ig-steps", type=int, default=20, help="m, the steps of integrated gradients, Eq. 3")
    ap.add_argument("--no-cross-tuning", action="store_true", help="AD-DROP in every epoch (Table 2's ablation)")
    ap.add_argument("--drop-low", action="store_true", help="drop LOW-attribution positions instead (Section 2.2)")
    ap.add_argument("--first-pass", default="eval", help="eval: attribution in eval mode (default); train: the "
                    "authors' code's, dropout on and A taken after attention dropout (ga and aa)")
    args = ap.parse_args(argv)
    check_args(args, ap.error)
    return args


def check_args(args, bad):
    """Refuse bad flag values before any work starts, each in one line naming the flag (bad: argparse's
    error, which prints the usage and exits)."""
    args.task = args.task.lower().replace("-", "")
    if args.task not in SETTINGS:
        bad(f"--task {args.task!r}: unknown; choose one of {', '.join(SETTINGS)}")
    if not 0 <= args.p <= 1:
        bad(f"--p {args.p}: must be in [0, 1]")
    if not 0 <= args.q <= 1:
        bad(f"--q {args.q}: must be in [0, 1]")
    if args.holdout is not None and not 0 < args.holdout < 1:
        bad(f"--holdout {args.holdout}: must be a fraction strictly between 0 and 1")
    if args.first_pass not in addrop.FIRST_PASSES:
        bad(f"--first-pass {args.first_pass!r}: choose eval or train")
    if args.first_pass == "train" and args.attribution not in ("ga", "aa"):
        bad(f"--first-pass train: offered for --attribution ga and aa only, not {args.attribution}")
    if not 0 <= args.rdrop < math.inf:
        bad(f"--rdrop {args.rdrop}: must be a number at least 0")
    if args.ood is not None and args.ood != "paws":
        bad(f"--ood {args.ood!r}: the one out-of-distribution set is paws")
    if args.ood and args.task not in ("mrpc", "qqp"):
        bad(f"--ood paws: PAWS is paraphrase identification; use it with --task mrpc or qqp, not {args.task}")
    if args.shots and args.task in data.TASKS and data.TASKS[args.task].token_level:
        bad(f"--shots: few-shot sampling draws K examples per class; {args.task} labels tokens, not sentences")
    if args.attribution not in addrop.ATTRIBUTIONS:
        bad(f"--attribution {args.attribution!r}: choose one of {', '.join(addrop.ATTRIBUTIONS)}")
    if args.labels not in ("pseudo", "gold"):
        bad(f"--labels {args.labels!r}: choose pseudo or gold")
    if args.dtype not in ("fp32", "bf16"):
        bad(f"--dtype {args.dtype!r}: choose fp32 or bf16")
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
    out = Path(args.out or f"out/{args.task}")
    flag = f"--out {args.out}" if args.out is not None else f"the default --out {out}"
    if out.exists() and not out.is_dir():
        bad(f"{flag}: is a file; pass a folder (it is created if missing)")
    for parent in out.parents:  # nearest first; under a file, mkdir would fail with NotADirectoryError
        if parent.exists() and not parent.is_dir():
            bad(f"{flag}: {parent} is a file, so no folder can be made under it; pass another --out")


class Diverged(SystemExit):
    """A non-finite training loss: the run cannot go on (a sweep records it and moves on)."""


class Busy(SystemExit):
    """--out is held by another run that still runs (a sweep leaves that run to it and moves on)."""


def adamw(net, lr, weight_decay):
    """AdamW with no weight decay on biases and LayerNorm (the 1-D parameters). fused: one
    kernel over all parameters, the same update as the default loop at a fraction of its
    time (on a CPU, 20 ms instead of 120 for MiniLM's 23M parameters)."""
    params = [p for p in net.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, fused=True)


def write_json(path, obj):
    """Write through a temporary file and a rename: an interruption or a full disk never leaves half a file."""
    modeling.atomic_write(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2)))


def copy_tokenizer(weights, out):
    """The model's tokenizer.json into out, next to the checkpoint, so that folder loads and tokenises alone."""
    modeling.atomic_write(Path(out) / "tokenizer.json",
                          lambda tmp: shutil.copyfile(Path(weights) / "tokenizer.json", tmp))


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


def run(args):
    """Train as args say; returns the result dict that is also written to metrics.json.
    The run in four named steps: setup (everything that can fail on bad input fails there, before
    training), then per epoch train_epoch, evaluate and save_epoch, then finish."""
    j = setup(args)
    with run_lock(j.out) if j.master else nullcontext():  # one run per folder
        resume(j)
        for epoch in range(j.first_epoch, j.epochs + 1):
            t0 = time.time()
            adrop, losses, dropped = train_epoch(j, epoch)
            if losses is None:
                break
            save_epoch(j, epoch_record(j, epoch, adrop, losses, dropped, t0))
            if j.step >= j.total_steps or epoch - j.best_epoch >= args.patience:
                break
        return finish(j)

# -----------------------------------------------------------------------------
# step 1: setup

class Split(NamedTuple):
    examples: list  # data.Example
    enc: list       # (ids, type_ids) per example, unpadded
    y: list         # per example a label, a score, or (token tasks) a label per sub-token


def setup(args):
    """The run's fixed parts, as one namespace j that the steps read: processes and device, model,
    settings, data, optimizer. Refuses bad input here, before any training."""
    j = SimpleNamespace(args=args, t_start=time.time())
    # torchrun starts WORLD_SIZE copies of this script, each with its RANK; plain python is a world of one
    j.rank, j.world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    j.device = pick_device(args.device, int(os.environ.get("LOCAL_RANK", 0)))
    if j.world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if j.device.type == "cuda" else "gloo")
    j.master = j.rank == 0  # only it prints, writes metrics.json and saves checkpoints
    j.say = print if j.master else (lambda *a, **k: None)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    j.task = data.get_task(args.task)
    j.token_level, j.regression = j.task.token_level, j.task.labels is None
    j.weights = modeling.resolve_weights(args.weights)
    j.net = modeling.from_pretrained(j.weights, data.num_labels(args.task), token_level=j.token_level).to(j.device)
    if j.rank > 0:  # same init on every rank (above); from here each rank draws its own dropout and masks
        torch.manual_seed(args.seed + 7919 * j.rank)
    row = settings_row(args.task, args.weights, j.net.cfg.model_type)
    j.lr, j.batch_size, j.max_len = args.lr or row["lr"], args.batch_size or row["batch_size"], args.max_len or row["max_len"]
    j.epochs = args.epochs or row.get("epochs", 4)
    if j.max_len > j.net.cfg.max_tokens:
        sys.exit(f"error: --max-len {j.max_len}: the model's position table holds at most {j.net.cfg.max_tokens} "
                 f"tokens ({j.weights / 'config.json'}: max_position_embeddings {j.net.cfg.max_position_embeddings})")
    try:
        j.layers = addrop.parse_layers(args.layers or ("first" if args.task in FIRST_LAYER_TASKS else "all"),
                                       j.net.cfg.num_hidden_layers)
    except ValueError as e:
        sys.exit(f"error: {e}")
    j.use_addrop = args.p > 0 and args.q > 0
    j.group_by_length = j.token_level if args.group_by_length is None else args.group_by_length
    load_data(j)
    j.out = Path(args.out or f"out/{args.task}")
    j.settings = {k: v for k, v in vars(args).items() if k not in RESUME_FREE}
    j.opt = adamw(j.net, j.lr, args.weight_decay)
    j.ddp = DistributedDataParallel(j.net, device_ids=[j.device.index] if j.device.type == "cuda" else None) \
        if j.world > 1 else j.net
    j.total_steps = min(args.max_steps or 10**12, math.ceil(len(j.splits["train"].y) / j.batch_size) * j.epochs)
    j.warmup_steps = int(args.warmup * j.total_steps)
    # bf16: matmuls in bfloat16 under autocast, weights, optimizer and loss in float32 (on CUDA and CPU)
    j.autocast = lambda: torch.autocast(j.device.type, torch.bfloat16) if args.dtype == "bf16" else nullcontext()
    j.history, j.best, j.best_epoch, j.step, j.first_epoch, j.best_weights = [], -math.inf, 0, 0, 1, None
    j.keep_best = bool(args.predict or args.ood)  # the best epoch's weights are scored again at the end
    sizes = " / ".join(f"{len(s.y)} {name}" for name, s in j.splits.items() if s.y)
    what = "plain fine-tuning" if not j.use_addrop else (
        f"AD-DROP p={args.p} q={args.q} {args.attribution} layers={j.layers} labels={args.labels}"
        f"{' low' if args.drop_low else ''}{'' if args.no_cross_tuning else ' with cross-tuning'}"
        f"{' first pass in train mode' if args.first_pass == 'train' else ''}")
    j.say(f"{args.task}: {sizes} examples | {j.weights} | {j.device}"
          f"{f' x {j.world} processes' if j.world > 1 else ''} | {args.dtype} | lr {j.lr} batch {j.batch_size} "
          f"max_len {j.max_len} | {what}{f' + R-Drop --rdrop {args.rdrop}' if args.rdrop else ''}")
    return j


def settings_row(task, weights_arg, model_type):
    """The defaults of SETTINGS for this task: the default model's own row when --weights is not given,
    else the model type's, else (ELECTRA on GLUE, for which the paper gives none) BERT's."""
    rows = SETTINGS[task]
    return rows["minilm" if weights_arg is None else model_type if model_type in rows else "bert"]


def load_data(j):
    """Read, sample and tokenise the splits into j.splits: train, dev and holdout (maybe empty); ood (PAWS)
    with --ood; with --predict the test sets (GLUE's unlabelled ones go to submission files)."""
    args = j.args
    data_dir = data.resolve_data_dir(args.data_dir)
    data.ensure_task(args.task, data_dir)
    train_ex = data.load_split(args.task, "train", data_dir)
    dev_ex = data.load_split(args.task, "dev", data_dir)
    if args.shots:
        train_ex = data.k_shot(train_ex, args.shots, args.seed)
    sample = (lambda ex, n, seed: ex[:n]) if args.limit_first else data.subsample
    if args.limit:  # a seeded, stratified random sample: the same for every method under one seed
        train_ex = sample(train_ex, args.limit, args.seed)
    if args.dev_limit:
        dev_ex = sample(dev_ex, args.dev_limit, args.seed)
    hold_ex = []
    if args.holdout:
        train_ex, hold_ex = data.holdout_split(train_ex, args.holdout, args.seed)
    parts = {"train": train_ex, "holdout": hold_ex, "dev": dev_ex}
    if args.ood:
        parts["ood"] = data.load_split(args.ood, "test", data_dir)
    j.test_index = {}  # GLUE test split -> the index column that its submission file repeats
    if args.predict and j.token_level:
        parts["test"] = data.load_split(args.task, "test", data_dir)
    elif args.predict:
        for _, split in data.SUBMISSION_FILES[args.task]:
            j.test_index[split], parts[split] = data.load_test(args.task, split, data_dir)
    tok = data.load_tokenizer(j.weights, j.max_len, j.net.cfg)  # refuses a tokenizer of another model
    j.pad_id = data.pad_token_id(tok)
    j.splits = {}
    for name, examples in parts.items():
        enc, y = data.encode(tok, examples)
        j.splits[name] = Split(examples, enc, y)
        if j.token_level and examples:  # no word vanishes from scoring: a cut word counts as predicted O
            words, sentences = data.words_cut(examples, y)
            if words:
                j.say(f"{name}: --max-len {j.max_len} cuts {words} words in {sentences} sentences; "
                      f"they are scored as predicted O")

# -----------------------------------------------------------------------------
# step 2: one epoch of training

def units(y):
    """What a loss is a mean over: the examples, or for a token task (labels (B, T)) its scored tokens."""
    return int((y != addrop.IGNORE).sum()) if y.dim() == 2 else len(y)


def loss_sum(logits, y, regression):
    """The loss summed over units (callers divide by the count they mean): cross-entropy, over the scored
    tokens for a token task, or for regression (STS-B) the squared error."""
    logits = logits.float()
    if logits.dim() == 3:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=addrop.IGNORE, reduction="sum")
    if regression:
        return F.mse_loss(logits.squeeze(-1), y, reduction="sum")
    return F.cross_entropy(logits, y, reduction="sum")


def rdrop_loss_sum(logits, y, regression, alpha):
    """R-Drop (Liang et al., NeurIPS 2021): logits of two forwards of the same examples with independent
    dropout, stacked (2B, ...). The mean of their two losses plus alpha times the symmetric KL divergence
    between their predicted distributions, 1/2 (KL(P1||P2) + KL(P2||P1)) per unit (for regression, the
    squared difference of the two scores), summed over units."""
    a, b = logits.float().chunk(2)
    loss = (loss_sum(a, y, regression) + loss_sum(b, y, regression)) / 2
    if regression:
        return loss + alpha * ((a - b) ** 2).sum()
    la, lb = a.log_softmax(-1), b.log_softmax(-1)
    kl = 0.5 * ((la.exp() * (la - lb)).sum(-1) + (lb.exp() * (lb - la)).sum(-1))  # (B,) or (B, T)
    if kl.dim() == 2:
        kl = kl[y != addrop.IGNORE]
    return loss + alpha * kl.sum()


def my_share(j, b):
    """This rank's rows of the global batch b, padding trimmed to their longest. A rank left
    without rows (a last batch smaller than the world) takes row 0 with weight 0."""
    B = len(b["labels"])
    lo, hi = B * j.rank // j.world, B * (j.rank + 1) // j.world
    weight = 1.0
    if lo == hi:
        lo, hi, weight = 0, 1, 0.0
    T = int(b["attention_mask"][lo:hi].sum(1).max())
    return {k: v[lo:hi, :T] if v.dim() == 2 else v[lo:hi] for k, v in b.items()}, weight


def to_device(b, device):
    return {k: v.to(device, non_blocking=True) for k, v in b.items() if k != "index"}


def train_epoch(j, epoch):
    """One pass over the training set, AD-DROP on every batch in AD-DROP epochs (Algorithm 1). Returns
    whether it was an AD-DROP epoch, each step's mean loss over the global batch (None if no step ran),
    and the summed dropped fraction."""
    args, train = j.args, j.splits["train"]
    adrop = j.use_addrop and addrop.is_addrop_epoch(epoch, not args.no_cross_tuning)
    losses, dropped = [], torch.zeros((), device=j.device)
    for b in data.batches(train.enc, train.y, j.batch_size, j.pad_id, shuffle=True, seed=args.seed, epoch=epoch,
                          group_by_length=j.group_by_length):
        if j.step >= j.total_steps:
            break
        ts = time.time()
        loss, drop = train_step(j, b, adrop)
        losses.append(loss)
        dropped += drop
        j.step += 1
        if j.step % args.log_interval == 0 or j.step == j.total_steps:
            loss_now = losses[-1].clone()
            if j.world > 1:
                dist.all_reduce(loss_now)
            j.say(f"step {j.step}/{j.total_steps} | loss {loss_now.item():.4f} | lr {j.opt.param_groups[0]['lr']:.2e} | "
                  f"{(time.time() - ts) * 1000:.0f} ms/step", flush=True)  # flush: `| tee log` shows it now
    return adrop, (torch.stack(losses) if losses else None), dropped


def train_step(j, b, adrop):
    """One optimizer step on the global batch b; returns this rank's part of the mean loss and the
    fraction of attention positions dropped."""
    args = j.args
    n = units(b["labels"])  # of the global batch; under torchrun each rank takes its share
    b, weight = my_share(j, b) if j.world > 1 else (b, 1.0)
    b = to_device(b, j.device)
    for g in j.opt.param_groups:
        g["lr"] = j.lr * min(1.0, (j.step + 1) / j.warmup_steps) if j.warmup_steps else j.lr
    masks, dropped = None, torch.zeros((), device=j.device)
    if adrop:  # Algorithm 1, lines 7-9: attribution, masks, then the masked forward below
        # on `net`, not the DDP wrapper: attribution and masks are per example and need no
        # communication, and a forward through the wrapper would make DDP wait for a
        # gradient all-reduce that this pass (gradients to A only) never triggers.
        # Precision: under bf16 the attribution pass runs in bf16 like training (it costs what a
        # training forward costs); A comes out of the softmax in float32 (the padding mask
        # promotes the scores), so B = dF/dA is a float32 tensor with bf16-rounded values, and
        # Eq. 6's threshold compares float32 numbers. bench.py --bf16-masks measures how often
        # the masks then agree with float32's.
        with j.autocast():
            masks = addrop.addrop_masks(j.net, b, j.layers, args.p, args.q, args.attribution,
                                        gold=args.labels == "gold", regression=j.regression, m=args.ig_steps,
                                        low=args.drop_low, first_pass=args.first_pass)
        dropped = addrop.dropped_fraction(masks, b["attention_mask"])
    inputs = [b["input_ids"], b["attention_mask"], b["token_type_ids"], masks]
    if args.rdrop:  # R-Drop: the batch twice in one forward, each copy with its own dropout
        inputs = [None if x is None else [None if M is None else torch.cat([M, M]) for M in x] if isinstance(x, list)
                  else torch.cat([x, x]) for x in inputs]
    with j.autocast():
        logits, _ = j.ddp(*inputs)
    total = rdrop_loss_sum(logits, b["labels"], j.regression, args.rdrop) if args.rdrop \
        else loss_sum(logits, b["labels"], j.regression)
    # this rank's part of the global batch mean; DDP averages gradients over ranks, hence * world
    part = total * (weight / n)
    (part * j.world).backward()
    j.opt.step()
    j.opt.zero_grad(set_to_none=True)
    return part.detach(), dropped

# -----------------------------------------------------------------------------
# step 3: evaluate

@torch.no_grad()
def evaluate(j, split):
    """Score a split with the current weights: its mean loss, the task's metrics, and the predictions in
    the split's order (class indices, scores, or for a token task each word's tag, a word cut by --max-len
    predicted O). Batches go by length (less padding); every rank scores the whole split with the same
    weights, so the numbers, and so the early-stopping decision, agree across ranks without communication."""
    j.net.eval()
    total, count, preds = 0.0, 0, [None] * len(split.y)
    labelled = bool(split.y) and split.y[0] is not None  # GLUE's test sets are not
    for b in data.batches(split.enc, split.y if labelled else None, j.batch_size, j.pad_id, group_by_length=True):
        index = b["index"].tolist()
        b = to_device(b, j.device)
        with j.autocast():
            logits, _ = j.net(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        if "labels" in b:
            total += loss_sum(logits, b["labels"], j.regression).item()
            count += units(b["labels"])
        out = (logits.float().squeeze(-1) if j.regression else logits.argmax(-1)).cpu()
        for row, i in enumerate(index):
            preds[i] = out[row, :len(split.y[i])].tolist() if j.token_level else out[row].item()
    j.net.train()
    if j.token_level:
        preds = data.word_predictions(preds, split.y, split.examples)
    if count == 0:  # GLUE's test sets have no labels: predictions only
        return math.nan, {}, preds
    gold = [e.label for e in split.examples] if j.token_level else split.y
    return total / count, data.compute_metrics(j.args.task, preds, gold), preds


def epoch_record(j, epoch, adrop, losses, dropped, t0):
    """The epoch's line of the history: train loss, dev loss and metrics (and the holdout's)."""
    if j.world > 1:
        dist.all_reduce(losses)
        dist.all_reduce(dropped)
        dropped /= j.world
    train_loss = losses.mean().item()
    dev_loss, metrics, _ = evaluate(j, j.splits["dev"])
    rec = {"epoch": epoch, "kind": "AD-DROP" if adrop else "plain", "train_loss": train_loss,
           "dev_loss": dev_loss, "dropped": (dropped / len(losses)).item() if adrop else 0.0, **metrics}
    if j.splits["holdout"].y:
        hold_loss, hold_metrics, _ = evaluate(j, j.splits["holdout"])
        rec.update(holdout_loss=hold_loss, holdout_metric=hold_metrics["metric"])
    rec["seconds"] = time.time() - t0
    rec["step_losses"] = [round(x, 6) for x in losses.tolist()]
    return rec

# -----------------------------------------------------------------------------
# step 4: save, after every epoch

def save_epoch(j, rec):
    """Record the epoch; keep the checkpoint if the selection metric (holdout's, else dev's) improved;
    write the training state and metrics.json; print the epoch's line once its state is on disk."""
    args, epoch = j.args, rec["epoch"]
    j.history.append(rec)
    if not math.isfinite(rec["train_loss"]):
        raise Diverged(f"error: epoch {epoch}: training loss is {rec['train_loss']}; try a smaller --lr")
    selected = rec.get("holdout_metric", rec["metric"])
    improved = selected > j.best
    if improved:
        j.best, j.best_epoch = selected, epoch
        if j.keep_best:
            j.best_weights = {k: v.detach().to("cpu", copy=True) for k, v in j.net.state_dict().items()}
    if improved and not args.no_checkpoint and j.master:
        labels = j.task.labels or ()
        modeling.save_pretrained(j.net, j.out, {"task": args.task, "id2label": dict(enumerate(labels)),
                                                "label2id": {t: i for i, t in enumerate(labels)}})
        copy_tokenizer(j.weights, j.out)
    save_state(j.out, j.master, j.world, j.settings, j.net, j.opt, epoch, j.step, j.best, j.best_epoch, j.history,
               j.best_weights)
    if j.master:
        write_json(j.out / "metrics.json", summary(j, finished=False))
    name, hold = j.task.metrics[0], "holdout_metric" in rec
    j.say(f"epoch {epoch} ({rec['kind']}) | train loss {rec['train_loss']:.4f} | dev loss {rec['dev_loss']:.4f} | "
          f"dev {name} {rec['metric']:.4f}" + (f" | holdout {name} {selected:.4f}" if hold else "")
          + f"{' *' if improved else ''} | dropped {rec['dropped']:.1%} | {rec['seconds']:.1f} s", flush=True)
    return improved


def summary(j, finished):
    dev_at_best = next(h["metric"] for h in j.history if h["epoch"] == j.best_epoch)
    return {"args": vars(j.args), "lr": j.lr, "epochs": j.epochs, "batch_size": j.batch_size, "max_len": j.max_len,
            "layers": j.layers, "world_size": j.world, "selection": "holdout" if j.splits["holdout"].y else "dev",
            "best_metric": j.best, "best_epoch": j.best_epoch, "dev_at_best": dev_at_best,
            "history": j.history, "seconds": time.time() - j.t_start, "finished": finished}


def finish(j):
    """After the last epoch: with --ood or --predict, the best epoch's weights score the extra sets (and
    write the prediction files); then the final metrics.json."""
    args = j.args
    if not j.history:
        sys.exit("error: no training step ran (is the training set empty?)")
    extra = {}
    if j.keep_best:
        if j.best_weights is None:  # resumed from a state written before states kept them
            sys.exit(f"error: --predict/--ood: {j.out / STATE} holds no best-epoch weights (an older state); "
                     "rerun without --resume")
        j.net.load_state_dict(j.best_weights)
    if args.ood:
        _, metrics, _ = evaluate(j, j.splits["ood"])
        extra["ood"] = {"task": args.ood, **metrics}
    if args.predict:
        extra["predictions"] = predict(j)
    result = {**summary(j, finished=True), **extra}  # a sweep skips runs marked finished and redoes the rest
    if j.master:
        write_json(j.out / "metrics.json", result)
        if args.no_checkpoint:  # a sweep keeps only the metrics of a finished run
            (j.out / STATE).unlink(missing_ok=True)
    name = j.task.metrics[0]
    j.say(f"best {result['selection']} {name} {j.best:.4f} at epoch {j.best_epoch}"
          + (f" (dev {name} {result['dev_at_best']:.4f})" if result["selection"] == "holdout" else "")
          + "".join(f" | {k} {v['metric']:.4f}" for k, v in extra.get("predictions", {}).items() if "metric" in v)
          + (f" | {args.ood} {extra['ood']['metric']:.4f}" if args.ood else "")
          + f"; {'metrics' if args.no_checkpoint else 'checkpoint'} in {j.out}/")
    return result


def predict(j):
    """--predict, with the best epoch's weights: CoNLL-2003 writes OUT/dev_predictions.txt and
    OUT/test_predictions.txt (`word gold predicted`, conlleval's input) and scores both; a GLUE task writes
    the files GLUE's server takes (OUT/RTE.tsv, ...). Returns the metrics of each labelled split."""
    scores = {}
    files = [(f"{split}_predictions.txt", split) for split in ("dev", "test")] if j.token_level \
        else data.SUBMISSION_FILES[j.args.task]
    for name, split in files:
        s = j.splits[split]
        _, metrics, preds = evaluate(j, s)
        if metrics:
            scores[split] = metrics
        if j.master and j.token_level:
            data.write_conll_predictions(j.out / name, s.examples, preds)
        elif j.master:
            data.write_glue_submission(j.out / name, j.args.task, j.test_index[split], preds)
        j.say(f"{split}: predictions in {j.out / name}")
    return scores

# -----------------------------------------------------------------------------
# one run per folder: two runs writing one --out would interleave their checkpoints, states and metrics

LOCK = "run.lock"


def lock_run_dir(out):
    """Claim out for this process: out/run.lock, created only if it is absent (O_CREAT | O_EXCL, one atomic
    step), holding who claimed it. A lock left by a run on this machine that no longer runs (killed with
    SIGKILL, or the machine restarted) is taken over with a note; any other lock is refused in one line.
    Returns the handle for unlock_run_dir."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    mine = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": datetime.now().astimezone().isoformat(timespec="seconds"), "argv": sys.argv}
    for _ in range(3):  # a lock released or taken over between our tries is tried again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = _read_lock(path)
            if held is None:  # released since our open
                continue
            who = f"pid {held['pid']} on {held['host']}, started {held['started']}"
            if not _gone(held):
                raise Busy(f"error: {path}: another run is using {out} ({who}); wait for it to finish, "
                           f"pass another --out, or delete {path} if that run is truly gone")
            print(f"{LOCK}: the run that held {out} ({who}) is gone; taking the folder over", flush=True)
            # read again just before removing it: a run taking over at the same moment may hold it now.
            # (Two takeovers within microseconds of each other could still both win; we accept that.)
            if _read_lock(path) == held:
                path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(mine, f)
        return path, mine
    sys.exit(f"error: {path}: other runs keep taking {out}; pass another --out")


def _read_lock(path):
    """The claim in a lock file, or None if it is gone. A lock being written this very moment (created, not
    yet filled) is read again after a pause; a file that still makes no sense is refused by name."""
    for pause in (0.05, 0.25, 1.0, None):
        try:
            held = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # ValueError: not UTF-8, not JSON
            why = e.strerror if isinstance(e, OSError) else f"not JSON: {e}"
        else:
            if (isinstance(held, dict) and {"pid", "host", "started"} <= held.keys()
                    and type(held["pid"]) is int and 0 < held["pid"] < 2**31):  # os.kill(0 or -n) means a group
                return held
            why = "no pid, host and start time in it"
        if pause is None:
            sys.exit(f"error: {path}: not a lock this script wrote ({why}); if no run is using "
                     f"{path.parent}, delete {path}")
        time.sleep(pause)


def _gone(held):
    """True only when the run that wrote the lock certainly no longer runs: it ran on this machine and no
    process has its pid. A run on another machine (a shared folder) cannot be checked from here, so it counts
    as running; so does a pid that a new, unrelated process has taken since (delete the lock by hand then)."""
    if held["host"] != socket.gethostname():
        return False
    try:
        os.kill(held["pid"], 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user's process
        return False
    return False


def unlock_run_dir(handle):
    """Remove the lock, if it is still this run's (one that took the folder over as stale owns it now)."""
    path, mine = handle
    try:
        if json.loads(path.read_bytes()) == mine:
            path.unlink()
    except (OSError, ValueError):
        pass


@contextmanager
def run_lock(out):
    """`with run_lock(out):` holds out for the block and releases it however the block ends, except by
    SIGKILL: the next run then finds the lock stale and takes the folder over."""
    handle = lock_run_dir(out)
    try:
        yield handle
    finally:
        unlock_run_dir(handle)

# -----------------------------------------------------------------------------
# the training state, for --resume

def resume(j):
    """With --resume: the weights, optimizer, counters, history and random streams of the last finished
    epoch in --out, so the run goes on as if it had never stopped."""
    if not j.args.resume:
        return
    state = load_state(j.out, j.settings, j.world, j.device)
    j.net.load_state_dict(state["model"])
    j.opt.load_state_dict(state["optimizer"])
    j.history, j.best, j.best_epoch, j.step = state["history"], state["best"], state["best_epoch"], state["step"]
    j.best_weights = state.get("best_weights")
    j.first_epoch = state["epoch"] + 1
    torch.set_rng_state(state["rng"][j.rank]["cpu"])
    if j.device.type == "cuda":
        torch.cuda.set_rng_state(state["rng"][j.rank]["cuda"], j.device)
    if j.first_epoch > j.epochs or j.step >= j.total_steps or state["epoch"] - j.best_epoch >= j.args.patience:
        metrics_file = j.out / "metrics.json"
        if metrics_file.is_file() and json.loads(metrics_file.read_text()).get("finished"):
            sys.exit(f"error: --resume: nothing to resume: the run in {j.out} already finished "
                     f"(epoch {state['epoch']} of {j.epochs}; raise --epochs to train longer)")
        # stopped after its last epoch's state and before the final metrics.json: only that is left to do
        j.first_epoch = j.epochs + 1
    j.say(f"resuming after epoch {state['epoch']} (step {j.step}) from {j.out / STATE}")

class _WriteAll:
    """The file torch.save writes through: every byte reaches the file, or write raises the OSError (ENOSPC,
    EIO) that stopped it. Given a path or a buffered file, torch reports a full disk as a RuntimeError about
    zip offsets instead ('unexpected pos 704 vs 598'), which names neither the file nor the cause."""

    def __init__(self, f):
        self.f = f  # an unbuffered file: its write returns how many bytes reached the disk

    def write(self, b):
        b, done = memoryview(b).cast("B"), 0
        while done < len(b):  # a short write (the disk just filled) is retried, and the retry raises ENOSPC
            done += self.f.write(b[done:])
        return done

    def flush(self):
        pass


def torch_save(obj, path):
    with open(path, "wb", buffering=0) as f:
        torch.save(obj, _WriteAll(f))


def save_state(out, master, world, settings, net, opt, epoch, step, best, best_epoch, history, best_weights=None):
    """After every epoch: weights, optimizer, counters, history and every rank's random streams (and, when
    the end of the run needs them, the best epoch's weights), written to a temporary name and renamed, so
    that a kill at any moment leaves the previous state whole."""
    rng = {"cpu": torch.get_rng_state()}
    if next(net.parameters()).is_cuda:
        rng["cuda"] = torch.cuda.get_rng_state(next(net.parameters()).device)
    rngs = [rng]
    if world > 1:  # each rank drew its own dropout and masks: keep every rank's streams
        rngs = [None] * world
        dist.all_gather_object(rngs, {k: v.cpu() for k, v in rng.items()})
    if master:
        state = {"settings": settings, "world_size": world, "epoch": epoch, "step": step, "best": best,
                 "best_epoch": best_epoch, "history": history, "rng": rngs,
                 "model": net.state_dict(), "optimizer": opt.state_dict(), "best_weights": best_weights}
        modeling.atomic_write(out / STATE, lambda tmp: torch_save(state, tmp))
    if world > 1:
        dist.barrier()  # no rank runs ahead of the saved state


def load_state(out, settings, world, device):
    """The state saved by save_state in out, refused with a message if it cannot continue this run."""
    path = Path(out) / STATE
    if not path.is_file():
        sys.exit(f"error: --resume: nothing to resume: {path} does not exist (drop --resume to start the run)")
    try:
        state = torch.load(path, map_location=device, weights_only=False)
        saved = state["settings"]
    except Exception as e:  # a file we did not write, or a truncated copy of one
        sys.exit(f"error: --resume: {path} is not a training state this script wrote ({type(e).__name__}: {e})")
    diff = [f"--{k.replace('_', '-')} {saved.get(k)!r} then, {v!r} now" for k, v in settings.items() if saved.get(k) != v]
    if state["world_size"] != world:
        diff.append(f"{state['world_size']} processes then, {world} now")
    if diff:
        sys.exit(f"error: --resume: {path} was made with other settings: {'; '.join(diff)}")
    return state


if __name__ == "__main__":
    args = parse_args()
    try:
        run(args)
    except (data.DataError, modeling.WeightsError, modeling.SaveError) as e:
        # loader, data and save errors already name the file, line or key: show just that
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        out = Path(args.out or f"out/{args.task}")
        argv = sys.argv if "--resume" in sys.argv else sys.argv + ["--resume"]
        launcher = ["torchrun", "--standalone", f"--nproc_per_node={os.environ['WORLD_SIZE']}"] \
            if int(os.environ.get("WORLD_SIZE", 1)) > 1 else ["python"]
        if (out / STATE).is_file():
            sys.exit(f"\ninterrupted: the state after the last finished epoch is in {out / STATE}; resume with\n"
                     f"    {shlex.join(launcher + argv)}")
        sys.exit("\ninterrupted before the first epoch finished: nothing to resume; rerun the same command")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

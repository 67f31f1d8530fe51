"""
Fine-tune a BERT/RoBERTa encoder on a GLUE task or CoNLL-2003 NER, with or without AD-DROP.

    python train.py --task rte                    # plain fine-tuning
    python train.py --task rte --p 0.7 --q 0.1    # AD-DROP with cross-tuning (Algorithm 1)
    python train.py --task rte --p 0.7 --q 0.1 --holdout 0.1    # select the epoch on held-out train data
    python train.py --task rte --p 0.7 --q 0.1 --resume         # continue the run in --out after a stop
    torchrun --standalone --nproc_per_node=2 train.py --task rte --p 0.7 --q 0.1   # data-parallel

One flat loop, nanoGPT-style: no Trainer, no callbacks. Every epoch is evaluated on dev (with --dev-once,
only at the end) and on the --holdout split, which then picks the best epoch; the best checkpoint is kept
in --out as safetensors (it loads back with checkpoint.from_pretrained), with a JSON of the metrics and the
arguments, and the whole training state after every epoch, every --save-every and on SIGTERM or
SIGUSR1 (exit code 75; --resume continues exactly where it stopped). The flags and the paper's
settings are in support/settings.py, the lock and the training state in support/state.py, what a run
reads in data.load_splits.
"""

import itertools
import math
import os
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from support import cpu
cpu.fair_share()  # before torch loads OpenMP: its threads wait passively on a busy CPU, else spin briefly (cpu.py)

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import impl
impl.from_argv(sys.argv[1:] if __name__ == "__main__" else [])  # a student's exercise files, before anything runs

import addrop
from support import checkpoint
import data
from support import metrics
from support import rdrop
from support import settings
from support import state


@dataclass
class Job:
    """Everything the steps of a run read and update, made once by setup (nanoGPT keeps these as globals)."""
    args: object                 # the command line, checked (settings.parse_args)
    rank: int                    # this process's place under torchrun (0 when alone)
    world: int                   # how many processes train together (1 when alone)
    device: torch.device
    task: data.Task
    weights: Path                # the folder the initial weights came from
    net: torch.nn.Module         # the model.Model being trained
    ddp: torch.nn.Module         # net, or under torchrun net wrapped in DistributedDataParallel
    opt: torch.optim.Optimizer   # AdamW, no decay on biases and LayerNorm
    opt_step: object             # opt.step, or under --compile that step compiled (compile_optimizer)
    lr: float                    # --lr, or the settings row's
    batch_size: int              # the global batch, split over the processes
    max_len: int                 # tokens per example at most
    epochs: int                  # at most this many
    layers: list                 # the layers AD-DROP acts in
    splits: dict                 # name -> data.Split: train, holdout (maybe empty), dev, and ood, test, ... when asked
    test_index: dict             # GLUE test split -> the index column its submission file repeats
    pad_id: int                  # the tokenizer's padding token
    out: Path                    # --out: checkpoint, metrics.json, training state, lock
    settings: dict               # the flags a --resume must repeat
    total_steps: int             # optimizer steps in the whole run (epochs, or --max-steps)
    warmup_steps: int            # of linear lr warm-up
    provenance: dict             # the machine and build that ran it (metrics.json)
    stop: state.StopSignals = None  # the stop flag that SIGTERM and SIGUSR1 raise
    step: int = 0                # optimizer steps done
    history: list = field(default_factory=list)  # one record per finished epoch
    best: float = -math.inf      # the best selection metric so far (holdout's, else dev's)
    best_epoch: int = 0          # the epoch that reached it
    best_weights: dict = None    # its weights, kept in memory when --predict, --ood or --dev-once score them at the end
    dev_at_best: dict = field(default_factory=dict)  # --dev-once: dev's loss and metrics with those weights
    first_epoch: int = 1         # where the loop starts (after --resume, the epoch after the saved one)
    compiled: dict = field(default_factory=dict)  # --compile: each kind of pass -> seconds its first run took
    partial: tuple = None        # after --resume inside an epoch: (batches done, losses, dropped, seconds)
    saved_at: float = field(default_factory=time.time)  # when the training state was last written
    t_start: float = field(default_factory=time.time)

    @property
    def master(self):  # only rank 0 prints, writes metrics.json and saves checkpoints
        return self.rank == 0

    @property
    def token_level(self):
        return self.task.token_level

    @property
    def regression(self):
        return self.task.labels is None

    @property
    def use_addrop(self):
        return self.args.p > 0 and self.args.q > 0

    @property
    def pad_to(self):  # --compile: every batch padded to --max-len, one static shape
        return self.max_len if self.args.compile else None

    @property
    def group_by_length(self):  # on for token tasks unless the flag says otherwise
        return self.token_level if self.args.group_by_length is None else self.args.group_by_length

    @property
    def keep_best(self):  # the best epoch's weights are scored again at the end
        return bool(self.args.predict or self.args.ood or self.args.dev_once)

    def say(self, *a, **k):
        if self.master:
            print(*a, **k)

    def autocast(self):
        """bf16: matmuls in bfloat16 under autocast; weights, optimizer and loss in float32 (CUDA and CPU)."""
        return torch.autocast(self.device.type, torch.bfloat16) if self.args.dtype == "bf16" else nullcontext()


class Diverged(SystemExit):
    """A non-finite training loss: the run cannot go on (a sweep records it and moves on)."""


def run(args):
    """Train as args say; returns the result dict that is also written to metrics.json. The run in named
    steps: setup (everything that can fail on bad input fails there, before training) and resume, then per
    epoch train_epoch, epoch_record and save_epoch, then finish."""
    j = setup(args)
    with state.run_lock(j.out) if j.master else nullcontext(), state.StopSignals() as j.stop:  # one run a folder
        state.resume(j)
        for epoch in range(j.first_epoch, j.epochs + 1):
            adrop, losses, dropped, t0 = train_epoch(j, epoch)
            if losses is None:
                break
            save_epoch(j, epoch_record(j, epoch, adrop, losses, dropped, t0))
            if j.step >= j.total_steps or epoch - j.best_epoch >= args.patience:
                break
        return finish(j)

# -----------------------------------------------------------------------------
# one epoch of training

def train_epoch(j, epoch):
    """One pass over the training set (the batches left, after --resume inside this epoch), AD-DROP on every
    batch in AD-DROP epochs (Algorithm 1). Saves the state when --save-every is due, and on a stop signal
    (then raises state.Stopped). Returns whether it was an AD-DROP epoch, each step's mean loss over the
    global batch (None if no step ran), the summed dropped fraction, and when the epoch started."""
    args, train = j.args, j.splits["train"]
    adrop = j.use_addrop and addrop.is_addrop_epoch(epoch, not args.no_cross_tuning)
    done, losses, dropped, seconds = j.partial or (0, [], torch.zeros((), device=j.device), 0.0)
    j.partial, t0, ts = None, time.time() - seconds, (time.time(), j.step)  # ts: when and where the log last spoke
    batches = data.batches(train.enc, train.y, j.batch_size, j.pad_id, shuffle=True, seed=args.seed, epoch=epoch,
                           group_by_length=j.group_by_length, pad_to=j.pad_to)
    for b in itertools.islice(batches, done, None):  # the order is fixed by seed and epoch: skip what is done
        if j.step >= j.total_steps:
            break
        with first_run(j, "AD-DROP step" if adrop else "plain step"):
            loss, drop = train_step(j, b, adrop)
        losses.append(loss)
        dropped += drop
        j.step, done = j.step + 1, done + 1
        if j.step % args.log_interval == 0 or j.step == j.total_steps:
            log_step(j, losses[-1], ts)
            ts = (time.time(), j.step)  # ms/step: the mean since the last line (a GPU runs ahead until .item())
        stop, save = state.stop_or_save(j)
        if stop or save:
            state.save(j, in_epoch={"epoch": epoch, "batches": done, "seconds": time.time() - t0},
                       local={"losses": torch.stack(losses), "dropped": dropped})
        if stop:
            raise state.Stopped(state.stopped_message(j, epoch, done))
    return adrop, (torch.stack(losses) if losses else None), dropped, t0


@contextmanager
def first_run(j, kind):
    """--compile: the first run of each kind of pass (plain step, AD-DROP step, evaluation) compiles its graphs;
    say how long it took (metrics.json keeps it as compile_seconds). Later runs replay what it made."""
    if not j.args.compile or kind in j.compiled:
        yield
        return
    t0 = time.time()
    yield
    if j.device.type == "cuda":
        torch.cuda.synchronize(j.device)
    j.compiled[kind] = time.time() - t0
    j.say(f"compiled: the first {kind} took {j.compiled[kind]:.1f} s", flush=True)


def log_step(j, loss, ts):
    if j.world > 1:
        loss = loss.clone()
        dist.all_reduce(loss)
    j.say(f"step {j.step}/{j.total_steps} | loss {loss.item():.4f} | lr {float(j.opt.param_groups[0]['lr']):.2e} | "
          f"{(time.time() - ts[0]) * 1000 / (j.step - ts[1]):.0f} ms/step", flush=True)  # flush: `| tee log` sees it


def train_step(j, b, adrop):
    """One optimizer step on the global batch b; returns this rank's part of the mean loss and the
    fraction of attention positions dropped."""
    args = j.args
    n = units(b)  # of the global batch; under torchrun each rank takes its share
    b, weight = my_share(j, b) if j.world > 1 else (b, 1.0)
    b = to_device(b, j.device)
    if args.compile:
        torch.compiler.cudagraph_mark_step_begin()  # a new step: CUDA graphs may reuse the last one's memory
    set_lr(j.opt, j.lr * min(1.0, (j.step + 1) / j.warmup_steps) if j.warmup_steps else j.lr)
    dropped = torch.zeros((), device=j.device)

    def forward(ids, pad, types, masks):  # through DDP; R-Drop: the batch twice, each copy with its own dropout
        return j.ddp(*rdrop.twice(ids, pad, types, masks)) if args.rdrop else j.ddp(ids, pad, types, masks)

    def loss(logits, y):
        if args.rdrop:
            return rdrop.loss_sum(logits, y, j.regression, args.rdrop, loss_sum, b.get("real"))
        return loss_sum(logits, y, j.regression, b.get("real"))

    masks = None
    if adrop:  # Algorithm 1, lines 7-8: attribution and a mask per layer (addrop.addrop_masks)
        # attribution on `net`, the masked forward below through the DDP wrapper: attribution and masks are
        # per example and need no communication, and a forward through the wrapper would make DDP wait for a
        # gradient all-reduce that this pass (gradients to A only) never triggers.
        # Precision: under bf16 the attribution pass runs in bf16 like training (it costs what a
        # training forward costs); A comes out of the softmax in float32 (the padding mask
        # promotes the scores), so B = dF/dA is a float32 tensor with bf16-rounded values, and
        # Eq. 6's threshold compares float32 numbers. studies/bench.py --bf16-masks measures how
        # often the masks then agree with float32's.
        with j.autocast():
            masks = addrop.addrop_masks(j.net, b, j.layers, args.p, args.q, method=args.attribution, mask=args.mask,
                                        gold=args.labels == "gold", regression=j.regression, m=args.ig_steps,
                                        first_pass=args.first_pass)
        dropped = addrop.whole_graph(addrop.dropped_fraction, args.compile)(masks, b["attention_mask"])
    with j.autocast():  # line 9 (or a plain step: no masks): the forward and its loss, on the gold labels
        logits, _ = forward(b["input_ids"], b["attention_mask"], b["token_type_ids"], masks)
    total = loss(logits, b["labels"])  # the loss casts the logits to float32 first
    # this rank's part of the global batch mean; DDP averages gradients over ranks, hence * world
    part = total * (weight / n)
    (part * j.world).backward()
    j.opt_step()
    j.opt.zero_grad(set_to_none=True)
    return part.detach(), dropped


def units(b):
    """What a loss is a mean over: the batch's examples, or for a token task (labels (B, T)) its scored tokens.
    A copy that fills the last batch under --compile (data.batches' real) counts for none."""
    y = b["labels"]
    if y.dim() == 2:
        return int((y != addrop.IGNORE).sum())
    return int(b["real"].sum()) if "real" in b else len(y)


def loss_sum(logits, y, regression, real=None):
    """The loss summed over units (callers divide by the count they mean): cross-entropy, over the scored
    tokens for a token task, or for regression (STS-B) the squared error. real (B,) bool: the rows that count
    (None: all; a token task's copies count for nothing already, their labels being IGNORE)."""
    logits = logits.float()
    if logits.dim() == 3:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=addrop.IGNORE, reduction="sum")
    reduction = "sum" if real is None else "none"
    if regression:
        per = F.mse_loss(logits.squeeze(-1), y, reduction=reduction)
    else:
        per = F.cross_entropy(logits, y, reduction=reduction)
    return per if real is None else (per * real).sum()


def my_share(j, b):
    """This rank's rows of the global batch b, padding trimmed to their longest (not under --compile: one static
    shape). A rank left without rows (a last batch smaller than the world) takes row 0 with weight 0."""
    B = len(b["labels"])
    lo, hi = B * j.rank // j.world, B * (j.rank + 1) // j.world
    lo, hi, weight = (0, 1, 0.0) if lo == hi else (lo, hi, 1.0)
    T = j.pad_to or int(b["attention_mask"][lo:hi].sum(1).max())
    return {k: v[lo:hi, :T] if v.dim() == 2 else v[lo:hi] for k, v in b.items()}, weight


def to_device(b, device):
    """The batch on the device. To a GPU from pinned memory: a copy from ordinary memory would wait for the GPU."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in b.items() if k != "index"}
    return {k: v.to(device) for k, v in b.items() if k != "index"}


# -----------------------------------------------------------------------------
# evaluate, and save after every epoch

@torch.no_grad()
def evaluate(j, split):
    """Score a split with the current weights: its mean loss, the task's metrics, and the predictions in
    the split's order (class indices, scores, or for a token task each word's tag, a word cut by --max-len
    predicted O). Batches go by length (less padding); every rank scores the whole split with the same
    weights, so the numbers, and so the early-stopping decision, agree across ranks without communication."""
    j.net.eval()
    total, count, preds = 0.0, 0, [None] * len(split.y)
    labelled = bool(split.y) and split.y[0] is not None  # GLUE's test sets are not
    for b in data.batches(split.enc, split.y if labelled else None, j.batch_size, j.pad_id, group_by_length=True,
                          pad_to=j.pad_to):
        index = b["index"].tolist()
        b = to_device(b, j.device)
        if j.args.compile:  # each batch a new step: CUDA graphs may reuse the last batch's memory (read above)
            torch.compiler.cudagraph_mark_step_begin()
        with j.autocast(), first_run(j, "evaluation"):
            logits, _ = j.net(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        if "labels" in b:
            total += loss_sum(logits, b["labels"], j.regression, b.get("real")).item()
            count += units(b)
        out = (logits.float().squeeze(-1) if j.regression else logits.argmax(-1)).cpu()
        for row, i in enumerate(index):
            if i >= 0:  # -1: a copy that fills the last batch under --compile
                preds[i] = out[row, :len(split.y[i])].tolist() if j.token_level else out[row].item()
    j.net.train()
    if j.token_level:
        preds = metrics.word_predictions(preds, split.y, split.examples)
    if count == 0:  # GLUE's test sets have no labels: predictions only
        return math.nan, {}, preds
    gold = [e.label for e in split.examples] if j.token_level else split.y
    return total / count, metrics.compute_metrics(j.args.task, preds, gold), preds


def epoch_record(j, epoch, adrop, losses, dropped, t0):
    """The epoch's line of the history: train loss, dev loss and metrics (and the holdout's)."""
    if j.world > 1:
        dist.all_reduce(losses)
        dist.all_reduce(dropped)
        dropped /= j.world
    train_loss = losses.mean().item()
    # --dev-once: dev is scored at the end only, with the held-out-best weights (finish)
    dev_loss, scores, _ = (math.nan, {}, None) if j.args.dev_once else evaluate(j, j.splits["dev"])
    rec = {"epoch": epoch, "kind": "AD-DROP" if adrop else "plain", "train_loss": train_loss,
           "dev_loss": dev_loss, "dropped": (dropped / len(losses)).item() if adrop else 0.0, **scores}
    if j.splits["holdout"].y:
        hold_loss, hold_scores, _ = evaluate(j, j.splits["holdout"])
        rec.update(holdout_loss=hold_loss, holdout_metric=hold_scores["metric"])
    rec["seconds"] = time.time() - t0
    rec["step_losses"] = [round(x, 6) for x in losses.tolist()]
    return rec


def save_epoch(j, rec):
    """Record the epoch; keep the checkpoint if the selection metric (holdout's, else dev's) improved;
    write the training state and metrics.json; print the epoch's line once its state is on disk."""
    args, epoch = j.args, rec["epoch"]
    j.history.append(rec)
    if not math.isfinite(rec["train_loss"]):
        raise Diverged(f"error: epoch {epoch}: training loss is {rec['train_loss']}; try a smaller --lr")
    selected = rec.get("holdout_metric", rec.get("metric"))
    improved = selected > j.best or (args.tie_break == "loss" and selected == j.best and
                                     selection_loss(rec) < selection_loss(j.history[j.best_epoch - 1]))
    if improved:
        j.best, j.best_epoch = selected, epoch
        if j.keep_best:
            j.best_weights = state.cpu_copy(j.net.state_dict())
    if improved and not args.no_checkpoint and j.master:
        checkpoint.save_run(j.net, j.out, args.task, j.task.labels, j.weights)
    if not args.no_epoch_state:
        state.save(j)
    if j.master:
        checkpoint.write_json(j.out / "metrics.json", summary(j, finished=False))
    name, hold = j.task.metrics[0], "holdout_metric" in rec
    dev = "" if args.dev_once else f" | dev loss {rec['dev_loss']:.4f} | dev {name} {rec['metric']:.4f}"
    j.say(f"epoch {epoch} ({rec['kind']}) | train loss {rec['train_loss']:.4f}{dev}"
          + (f" | holdout loss {rec['holdout_loss']:.4f} | holdout {name} {selected:.4f}" if hold else "")
          + f"{' *' if improved else ''} | dropped {rec['dropped']:.1%} | {rec['seconds']:.1f} s", flush=True)
    return improved


def selection_loss(rec):
    """--tie-break loss: between epochs of equal selection metric, the lower loss on the selecting split wins."""
    return rec.get("holdout_loss", rec["dev_loss"])


def summary(j, finished):
    dev_at_best = j.dev_at_best.get("metric") if j.args.dev_once else \
        next(h["metric"] for h in j.history if h["epoch"] == j.best_epoch)
    return {"args": vars(j.args), "lr": j.lr, "epochs": j.epochs, "batch_size": j.batch_size, "max_len": j.max_len,
            "layers": j.layers, "world_size": j.world, "selection": "holdout" if j.splits["holdout"].y else "dev",
            "best_metric": j.best, "best_epoch": j.best_epoch, "dev_at_best": dev_at_best,
            "history": j.history, "seconds": time.time() - j.t_start, "finished": finished,
            "provenance": j.provenance, **({"compile_seconds": j.compiled} if j.args.compile else {})}


def finish(j):
    """After the last epoch: with --ood or --predict, the best epoch's weights score the extra sets (and
    write the prediction files); then the final metrics.json."""
    args = j.args
    if not j.history:
        sys.exit("error: no training step ran (is the training set empty?)")
    extra = {}
    if j.keep_best:  # (state.resume refuses a run whose best weights were not kept)
        j.net.load_state_dict(j.best_weights)
    if args.dev_once:
        dev_loss, scores, _ = evaluate(j, j.splits["dev"])
        j.dev_at_best = {"loss": dev_loss, **scores}
        extra["dev_once"] = j.dev_at_best
    if args.ood:
        _, scores, _ = evaluate(j, j.splits["ood"])
        extra["ood"] = {"task": args.ood, **scores}
    if args.predict:
        extra["predictions"] = metrics.predict(j, evaluate)
    result = {**summary(j, finished=True), **extra}  # a sweep skips runs marked finished and redoes the rest
    if j.master:
        checkpoint.write_json(j.out / "metrics.json", result)
        if args.no_checkpoint:  # a sweep keeps only the metrics of a finished run
            (j.out / state.STATE).unlink(missing_ok=True)
    name = j.task.metrics[0]
    sample = " (the --dev-limit sample)" if args.dev_limit and result["selection"] == "dev" else ""
    j.say(f"best {result['selection']}{sample} {name} {j.best:.4f} at epoch {j.best_epoch}"
          + (f" (dev {name} {result['dev_at_best']:.4f})" if result["selection"] == "holdout" else "")
          + "".join(f" | {'all of dev' if k == 'dev' else k} {v['metric']:.4f}"
                    for k, v in extra.get("predictions", {}).items() if "metric" in v)
          + (f" | {args.ood} {extra['ood']['metric']:.4f}" if args.ood else "")
          + f"; {'metrics' if args.no_checkpoint else 'checkpoint'} in {j.out}/")
    return result


# -----------------------------------------------------------------------------
# setup and data: everything before the first step

def setup(args):
    """The run's fixed parts, as the Job that the steps read: processes and device, model, settings, data,
    optimizer. Refuses bad input here, before any training."""
    # torchrun starts WORLD_SIZE copies of this script, each with its RANK; plain python is a world of one
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = settings.pick_device(args.device, int(os.environ.get("LOCAL_RANK", 0)))
    if world > 1 and not dist.is_initialized():
        # on GPUs, nccl for the gradients and gloo for the small CPU tensors (state.stop_or_save's flags)
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    task = data.get_task(args.task)
    impl.check_loaded(args.impl)  # loaded at import from the command line (impl.from_argv); train.run() cannot
    weights = checkpoint.resolve_weights(args.weights)
    net = checkpoint.from_pretrained(weights, data.num_labels(args.task), token_level=task.token_level).to(device)
    if args.compile:
        compile_model(net, args.compile, device)
    if rank > 0:  # same init on every rank (above); from here each rank draws its own dropout and masks
        torch.manual_seed(args.seed + 7919 * rank)
    row = settings.settings_row(args.task, args.weights, net.cfg.model_type)
    lr, batch_size, max_len = args.lr or row["lr"], args.batch_size or row["batch_size"], args.max_len or row["max_len"]
    epochs = args.epochs or row.get("epochs", 4)
    if max_len > net.cfg.max_tokens:
        sys.exit(f"error: --max-len {max_len}: the model's position table holds at most {net.cfg.max_tokens} "
                 f"tokens ({weights / 'config.json'}: max_position_embeddings {net.cfg.max_position_embeddings})")
    try:
        default = "first" if args.task in settings.FIRST_LAYER_TASKS else "all"
        layers = settings.parse_layers(default if args.layers is None else args.layers, net.cfg.num_hidden_layers)
    except ValueError as e:
        sys.exit(f"error: {e}")
    say = print if rank == 0 else (lambda *a, **k: None)
    if (tuned := checkpoint.fine_tuned_on(weights)) not in (None, args.task):
        say(f"note: {weights} was fine-tuned on {tuned}: this {args.task} run starts from its weights (its classifier "
            "too, where it fits), and the defaults are settings.py's for a --weights model (pass --lr to choose)")
    splits, test_index, pad_id = data.load_splits(args, task, weights, net.cfg, max_len, say)
    total_steps = min(args.max_steps or 10**12, math.ceil(len(splits["train"].y) / batch_size) * epochs)
    j = Job(args=args, rank=rank, world=world, device=device, task=task, weights=weights, net=net,
            ddp=DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
            if world > 1 else net, opt=(opt := adamw(net, lr, args.weight_decay, compiled=bool(args.compile))),
            opt_step=compile_optimizer(opt, args.compile) if args.compile else opt.step, lr=lr, batch_size=batch_size,
            max_len=max_len, epochs=epochs, layers=layers, splits=splits, test_index=test_index, pad_id=pad_id,
            out=Path(args.out or f"out/{args.task}"),
            settings={k: v for k, v in vars(args).items() if k not in settings.RESUME_FREE},
            total_steps=total_steps, warmup_steps=int(args.warmup * total_steps),
            provenance=settings.provenance(device, world))
    j.say(settings.describe(j))
    return j


def compile_model(net, backend, device):
    """--compile: the model's forward through torch.compile, in place (the state_dict keeps its keys), with
    CUDA graphs on a GPU (inductor's mode reduce-overhead): a step's kernels replayed at once, not launched one
    by one from Python. Each kind of pass compiles once per batch shape: a training step with masks and
    without, the attribution pass, the evaluation, each at the full batch and the last, smaller one."""
    mode = "reduce-overhead" if backend == "inductor" and device.type == "cuda" else None
    torch._dynamo.config.cache_size_limit = 32  # those passes (8 by default, and --rdrop doubles a batch)
    net.compile(backend=backend, mode=mode, dynamic=False)  # a graph per shape, never one with a symbolic batch size
    addrop.GRAPH_BACKEND = backend  # the masks of all layers as one compiled graph (addrop.layer_masks)
    if device.type == "cpu" and backend == "inductor" and int(os.environ.get("RANK", 0)) == 0:
        print("note: --compile is for a GPU; on a 2-core CPU a compiled MiniLM step took 1.4x the eager one")


def adamw(net, lr, weight_decay, compiled=False):
    """AdamW with no weight decay on biases and LayerNorm (the 1-D parameters). fused: one
    kernel over all parameters, the same update as the default loop at a fraction of its
    time (on a CPU, 20 ms instead of 120 for MiniLM's 23M parameters). compiled (--compile): the
    foreach form with lr a tensor on the device (capturable), which compile_optimizer turns into one
    graph that the warm-up's changing lr does not recompile."""
    params = [p for p in net.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    if compiled:
        return torch.optim.AdamW(groups, lr=torch.tensor(float(lr), device=params[0].device), foreach=True,
                                 capturable=True)
    return torch.optim.AdamW(groups, lr=lr, fused=True)


def compile_optimizer(opt, backend):
    """--compile: AdamW's step through torch.compile, one graph for every parameter's update (the same update
    as the fused kernel, to float rounding) instead of the CPU handing the GPU a kernel per tensor list."""
    return torch.compile(opt.step, backend=backend)


def set_lr(opt, lr):
    """Every group's learning rate: a number, or under --compile written into its tensor (no recompile)."""
    for g in opt.param_groups:
        if isinstance(g["lr"], torch.Tensor):
            g["lr"].fill_(lr)
        else:
            g["lr"] = lr


def main():
    args = settings.parse_args(description=__doc__)
    try:
        run(args)
        if dist.is_initialized():
            dist.barrier()  # every rank done with its collectives before any tears down its connections
    except (data.DataError, checkpoint.WeightsError, checkpoint.SaveError) as e:
        # loader, data and save errors already name the file, line or key: show just that
        sys.exit(f"error: {e}")
    except state.Stopped as e:
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"\n{e.message}", file=sys.stderr, flush=True)
        raise
    except NotImplementedError as e:
        if not str(e).startswith("Exercise "):
            raise
        sys.exit(f"error: --impl: {e}")  # a blank exercise reached: its message says what to write and how to check it
    except KeyboardInterrupt:  # Ctrl-C: at once, the state last saved stands; exit 130, the shell's 128 + SIGINT
        print(state.interrupted_message(Path(args.out or f"out/{args.task}")), file=sys.stderr, flush=True)
        sys.exit(130)
    except Exception as e:  # with a student's files standing in, say which, and how to check them
        if not args.impl:
            raise
        sys.exit(impl.failed(args.impl, e))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()

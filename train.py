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
import sys
import time
from contextlib import nullcontext
from pathlib import Path

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
# The default model, all-MiniLM-L6-v2 (6 layers, 384 wide), is not base-sized: at Table 4's lr 1e-5 it barely
# moves in a few epochs. Its own row, used when --weights is not given: lr and epochs picked on held-out training
# data (--holdout 0.1) of SST-2 and RTE with plain fine-tuning, over lr 1e-5, 3e-5, 1e-4 (README, "Defaults for the
# default model"); batch size, max length, p and q stay Table 4's BERT values.
MINILM = dict(lr=3e-5, epochs=3)
for row in SETTINGS.values():
    row["minilm"] = {**row["bert"], **MINILM}
# Section 3.1: AD-DROP in the first layer on the large, stable tasks, in all layers on the rest
FIRST_LAYER_TASKS = ("sst2", "mnli", "qnli", "qqp", "stsb")
STATE = "train_state.pt"  # the training state after the last finished epoch, in --out
# flags that may differ between a run and its --resume without changing what is trained
RESUME_FREE = ("out", "resume", "log_interval", "threads", "data_dir", "device", "epochs", "no_checkpoint")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="rte", help="GLUE task: " + ", ".join(SETTINGS))
    ap.add_argument("--weights", default=None, help="weights folder, or a name under weights/ (default: all-MiniLM-L6-v2)")
    ap.add_argument("--data-dir", default=None, help="GLUE folder (default: $GLUE_DIR, else data/glue)")
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
    ap.add_argument("--limit", type=int, default=None, help="use only the first N training examples")
    ap.add_argument("--dev-limit", type=int, default=None, help="score on the first N dev examples only")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 can be faster on a busy machine)")
    ap.add_argument("--shots", type=int, default=None, help="few-shot: K training examples per class")
    ap.add_argument("--log-interval", type=int, default=20, help="steps between log lines")
    ap.add_argument("--no-checkpoint", action="store_true", help="keep only metrics.json (sweeps)")
    # AD-DROP
    ap.add_argument("--p", type=float, default=0.0, help="candidate region size, Eq. 6 (0: plain fine-tuning)")
    ap.add_argument("--q", type=float, default=0.0, help="drop rate inside the candidate region, Eq. 7")
    ap.add_argument("--attribution", default="ga", help="ga (gradient), iga (integrated gradient), aa (attention), rd (random)")
    ap.add_argument("--labels", default="pseudo", help="attribute the pseudo label (paper) or the gold label")
    ap.add_argument("--layers", default=None, help="first, all, or indices like 0,2 (default: per task, Section 3.1)")
    ap.add_argument("--ig-steps", type=int, default=20, help="m, the steps of integrated gradients, Eq. 3")
    ap.add_argument("--no-cross-tuning", action="store_true", help="AD-DROP in every epoch (Table 2's ablation)")
    ap.add_argument("--drop-low", action="store_true", help="drop LOW-attribution positions instead (Section 2.2)")
    args = ap.parse_args(argv)
    # refuse bad input before any work starts
    bad = ap.error
    args.task = args.task.lower().replace("-", "")
    if args.task not in SETTINGS:
        bad(f"--task {args.task!r}: unknown; choose one of {', '.join(SETTINGS)}")
    if not 0 <= args.p <= 1:
        bad(f"--p {args.p}: must be in [0, 1]")
    if not 0 <= args.q <= 1:
        bad(f"--q {args.q}: must be in [0, 1]")
    if args.holdout is not None and not 0 < args.holdout < 1:
        bad(f"--holdout {args.holdout}: must be a fraction strictly between 0 and 1")
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
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        bad(f"--out {args.out}: is a file; pass a folder (it is created if missing)")
    return args


class Diverged(SystemExit):
    """A non-finite training loss: the run cannot go on (a sweep records it and moves on)."""


def adamw(net, lr, weight_decay):
    """AdamW with no weight decay on biases and LayerNorm (the 1-D parameters). fused: one
    kernel over all parameters, the same update as the default loop at a fraction of its
    time (on a CPU, 20 ms instead of 120 for MiniLM's 23M parameters)."""
    params = [p for p in net.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, fused=True)


def write_json(path, obj):
    """Write through a temporary file and a rename: an interruption never leaves half a file."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, path)


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
    """Train as args say; returns the result dict that is also written to metrics.json."""
    t_start = time.time()
    # ---- setup: everything that can fail on bad input fails here, before training
    # torchrun starts WORLD_SIZE copies of this script, each with its RANK; plain python is a world of one
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = pick_device(args.device, int(os.environ.get("LOCAL_RANK", 0)))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    master = rank == 0  # only it prints, writes metrics.json and saves checkpoints
    say = print if master else (lambda *a, **k: None)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    task = data.get_task(args.task)
    regression = task.labels is None
    weights = modeling.resolve_weights(args.weights)
    net = modeling.from_pretrained(weights, data.num_labels(args.task)).to(device)
    if rank > 0:  # same init on every rank (above); from here each rank draws its own dropout and masks
        torch.manual_seed(args.seed + 7919 * rank)
    t4 = SETTINGS[args.task]["minilm" if args.weights is None else net.cfg.model_type]
    lr, batch_size, max_len = args.lr or t4["lr"], args.batch_size or t4["batch_size"], args.max_len or t4["max_len"]
    epochs = args.epochs or t4.get("epochs", 4)
    if max_len > net.cfg.max_tokens:
        sys.exit(f"error: --max-len {max_len}: the model's position table holds at most {net.cfg.max_tokens} "
                 f"tokens ({weights / 'config.json'}: max_position_embeddings {net.cfg.max_position_embeddings})")
    L = net.cfg.num_hidden_layers
    layer_spec = args.layers or ("first" if args.task in FIRST_LAYER_TASKS else "all")
    try:
        layers = addrop.parse_layers(layer_spec, L)
    except ValueError as e:
        sys.exit(f"error: {e}")
    use_addrop = args.p > 0 and args.q > 0
    data_dir = data.resolve_data_dir(args.data_dir)
    data.ensure_task(args.task, data_dir)
    train_ex = data.load_split(args.task, "train", data_dir)
    dev_ex = data.load_split(args.task, "dev", data_dir)[:args.dev_limit]
    if args.shots:
        train_ex = data.k_shot(train_ex, args.shots, args.seed)
    if args.limit:
        train_ex = train_ex[:args.limit]
    hold_ex = []
    if args.holdout:
        train_ex, hold_ex = data.holdout_split(train_ex, args.holdout, args.seed)
    tok = data.load_tokenizer(weights, max_len, net.cfg)  # refuses a tokenizer of another model
    pad_id = data.pad_token_id(tok)
    train_enc, dev_enc, hold_enc = data.encode(tok, train_ex), data.encode(tok, dev_ex), data.encode(tok, hold_ex)
    train_y, dev_y, hold_y = [e.label for e in train_ex], [e.label for e in dev_ex], [e.label for e in hold_ex]
    out = Path(args.out or f"out/{args.task}")
    settings = {k: v for k, v in vars(args).items() if k not in RESUME_FREE}
    state = load_state(out, settings, world, device) if args.resume else None
    if master:
        out.mkdir(parents=True, exist_ok=True)

    opt = adamw(net, lr, args.weight_decay)
    ddp = DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None) if world > 1 else net
    steps_per_epoch = math.ceil(len(train_enc) / batch_size)
    total_steps = min(args.max_steps or 10**12, steps_per_epoch * epochs)
    warmup_steps = int(args.warmup * total_steps)
    # bf16: matmuls in bfloat16 under autocast, weights, optimizer and loss in float32 (on CUDA and CPU)
    autocast = lambda: torch.autocast(device.type, torch.bfloat16) if args.dtype == "bf16" else nullcontext()

    def loss_sum(logits, y):  # summed over the examples: callers divide by the count they mean
        logits = logits.float()
        return F.mse_loss(logits.squeeze(-1), y, reduction="sum") if regression else F.cross_entropy(logits, y, reduction="sum")

    def to_device(b):
        return {k: v.to(device, non_blocking=True) for k, v in b.items()}

    @torch.no_grad()
    def evaluate(enc, y):
        # every rank scores the whole split with the same weights: the same numbers everywhere, so the
        # early-stopping decision agrees across ranks without any communication
        net.eval()
        total, preds = 0.0, []
        for b in data.batches(enc, y, batch_size, pad_id):
            b = to_device(b)
            with autocast():
                logits, _ = net(b["input_ids"], b["attention_mask"], b["token_type_ids"])
            total += loss_sum(logits, b["labels"]).item()
            preds.append(logits.float().squeeze(-1) if regression else logits.argmax(-1))
        net.train()
        preds = torch.cat(preds).cpu().numpy()
        return total / len(y), data.compute_metrics(args.task, preds, y)

    def my_share(b):
        """This rank's rows of the global batch b, padding trimmed to their longest. A rank left
        without rows (a last batch smaller than the world) takes row 0 with weight 0."""
        B = len(b["labels"])
        lo, hi = B * rank // world, B * (rank + 1) // world
        weight = 1.0
        if lo == hi:
            lo, hi, weight = 0, 1, 0.0
        T = int(b["attention_mask"][lo:hi].sum(1).max())
        return {k: v[lo:hi, :T] if v.dim() == 2 else v[lo:hi] for k, v in b.items()}, weight

    what = "plain fine-tuning" if not use_addrop else (
        f"AD-DROP p={args.p} q={args.q} {args.attribution} layers={layers} labels={args.labels}"
        f"{' low' if args.drop_low else ''}{'' if args.no_cross_tuning else ' with cross-tuning'}")
    say(f"{args.task}: {len(train_ex)} train / {f'{len(hold_ex)} holdout / ' if hold_ex else ''}{len(dev_ex)} dev examples | {weights} | "
        f"{device}{f' x {world} processes' if world > 1 else ''} | {args.dtype} | "
        f"lr {lr} batch {batch_size} max_len {max_len} | {what}")

    # ---- training
    history, best, best_epoch, step, first_epoch = [], -math.inf, 0, 0, 1
    if state is not None:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        history, best, best_epoch, step = state["history"], state["best"], state["best_epoch"], state["step"]
        first_epoch = state["epoch"] + 1
        torch.set_rng_state(state["rng"][rank]["cpu"])
        if device.type == "cuda":
            torch.cuda.set_rng_state(state["rng"][rank]["cuda"], device)
        if first_epoch > epochs or step >= total_steps or state["epoch"] - best_epoch >= args.patience:
            metrics_file = out / "metrics.json"
            if metrics_file.is_file() and json.loads(metrics_file.read_text()).get("finished"):
                sys.exit(f"error: --resume: nothing to resume: the run in {out} already finished "
                         f"(epoch {state['epoch']} of {epochs}; raise --epochs to train longer)")
            # stopped after its last epoch's state and before the final metrics.json: only that is left to do
            first_epoch = epochs + 1
        say(f"resuming after epoch {state['epoch']} (step {step}) from {out / STATE}")

    def summary(finished):
        dev_at_best = next(h["metric"] for h in history if h["epoch"] == best_epoch)
        return {"args": vars(args), "lr": lr, "epochs": epochs, "batch_size": batch_size, "max_len": max_len,
                "layers": layers, "world_size": world, "selection": "holdout" if hold_ex else "dev",
                "best_metric": best, "best_epoch": best_epoch, "dev_at_best": dev_at_best,
                "history": history, "seconds": time.time() - t_start, "finished": finished}

    net.train()
    for epoch in range(first_epoch, epochs + 1):
        adrop = use_addrop and addrop.is_addrop_epoch(epoch, not args.no_cross_tuning)
        t0 = time.time()
        step_losses, drop_sum = [], torch.zeros((), device=device)
        for b in data.batches(train_enc, train_y, batch_size, pad_id, shuffle=True, seed=args.seed, epoch=epoch):
            if step >= total_steps:
                break
            ts = time.time()
            B = len(b["labels"])  # the global batch; under torchrun each rank takes its share
            b, weight = my_share(b) if world > 1 else (b, 1.0)
            b = to_device(b)
            lr_now = lr * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr
            for g in opt.param_groups:
                g["lr"] = lr_now
            masks = None
            if adrop:  # Algorithm 1, lines 7-9: attribution, masks, then the masked forward below
                # on `net`, not the DDP wrapper: attribution and masks are per example and need no
                # communication, and a forward through the wrapper would make DDP wait for a
                # gradient all-reduce that this pass (gradients to A only) never triggers.
                # Precision: under bf16 the attribution pass runs in bf16 like training (it costs what a
                # training forward costs); A comes out of the softmax in float32 (the padding mask
                # promotes the scores), so B = dF/dA is a float32 tensor with bf16-rounded values, and
                # Eq. 6's threshold compares float32 numbers. bench.py --bf16-masks measures how often
                # the masks then agree with float32's.
                with autocast():
                    masks = addrop.addrop_masks(net, b, layers, args.p, args.q, args.attribution,
                                                gold=args.labels == "gold", regression=regression,
                                                m=args.ig_steps, low=args.drop_low)
                drop_sum += addrop.dropped_fraction(masks, b["attention_mask"])
            with autocast():
                logits, _ = ddp(b["input_ids"], b["attention_mask"], b["token_type_ids"], masks)
            # this rank's part of the global batch mean; DDP averages gradients over ranks, hence * world
            part = loss_sum(logits, b["labels"]) * (weight / B)
            (part * world).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step_losses.append(part.detach())
            step += 1
            if step % args.log_interval == 0 or step == total_steps:
                loss_now = step_losses[-1].clone()
                if world > 1:
                    dist.all_reduce(loss_now)
                say(f"step {step}/{total_steps} | loss {loss_now.item():.4f} | lr {lr_now:.2e} | "
                    f"{(time.time() - ts) * 1000:.0f} ms/step", flush=True)  # flush: `| tee log` shows it now
        if not step_losses:
            break
        losses = torch.stack(step_losses)  # each step's mean loss over the global batch
        if world > 1:
            dist.all_reduce(losses)
            dist.all_reduce(drop_sum)
            drop_sum /= world
        train_loss = losses.mean().item()
        dev_loss, metrics = evaluate(dev_enc, dev_y)
        rec = {"epoch": epoch, "kind": "AD-DROP" if adrop else "plain", "train_loss": train_loss,
               "dev_loss": dev_loss, "dropped": (drop_sum / len(step_losses)).item() if adrop else 0.0,
               "seconds": time.time() - t0, **metrics}
        selected = metrics["metric"]
        if hold_ex:
            hold_loss, hold_metrics = evaluate(hold_enc, hold_y)
            rec.update(holdout_loss=hold_loss, holdout_metric=hold_metrics["metric"])
            selected = hold_metrics["metric"]
        rec["step_losses"] = [round(x, 6) for x in losses.tolist()]
        history.append(rec)
        if not math.isfinite(train_loss):
            raise Diverged(f"error: epoch {epoch}: training loss is {train_loss}; try a smaller --lr")
        improved = selected > best
        if improved:
            best, best_epoch = selected, epoch
        if improved and not args.no_checkpoint and master:
            modeling.save_pretrained(net, out, {"task": args.task})
            shutil.copyfile(weights / "tokenizer.json", out / "tokenizer.json.tmp")
            os.replace(out / "tokenizer.json.tmp", out / "tokenizer.json")
        save_state(out, master, world, settings, net, opt, epoch, step, best, best_epoch, history)
        if master:
            write_json(out / "metrics.json", summary(finished=False))
        # printed once the epoch's state is on disk
        say(f"epoch {epoch} ({rec['kind']}) | train loss {train_loss:.4f} | dev loss {dev_loss:.4f} | "
            f"dev {task.metrics[0]} {metrics['metric']:.4f}"
            + (f" | holdout {task.metrics[0]} {selected:.4f}" if hold_ex else "")
            + f"{' *' if improved else ''} | dropped {rec['dropped']:.1%} | {rec['seconds']:.1f} s", flush=True)
        if step >= total_steps or epoch - best_epoch >= args.patience:
            break
    if not history:
        sys.exit("error: no training step ran (is the training set empty?)")
    result = summary(finished=True)  # a sweep skips runs marked finished and redoes the rest
    if master:
        write_json(out / "metrics.json", result)
        if args.no_checkpoint:  # a sweep keeps only the metrics of a finished run
            (out / STATE).unlink(missing_ok=True)
    say(f"best {'holdout' if hold_ex else 'dev'} {task.metrics[0]} {best:.4f} at epoch {best_epoch}"
        + (f" (dev {task.metrics[0]} {result['dev_at_best']:.4f})" if hold_ex else "")
        + f"; {'metrics' if args.no_checkpoint else 'checkpoint'} in {out}/")
    return result

# -----------------------------------------------------------------------------
# the training state, for --resume

def save_state(out, master, world, settings, net, opt, epoch, step, best, best_epoch, history):
    """After every epoch: weights, optimizer, counters, history and every rank's random streams, written
    to a temporary name and renamed, so that a kill at any moment leaves the previous state whole."""
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
                 "model": net.state_dict(), "optimizer": opt.state_dict()}
        torch.save(state, out / (STATE + ".tmp"))
        os.replace(out / (STATE + ".tmp"), out / STATE)
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
    except (data.DataError, modeling.WeightsError) as e:
        # loader and data errors already name the file, line or key: show just that
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

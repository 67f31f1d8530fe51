"""
What AD-DROP costs: one training step of each attribution, as a ratio to a plain fine-tuning step,
beside the paper's Table 7 (BERT-base) and the floor each method cannot beat.

    python studies/bench.py                            # the installed all-MiniLM-L6-v2, batch 16 x 128
    python studies/bench.py --config base --skip-iga   # a random BERT-base-sized model (12 layers, 768)

A step is what train.py's train_step does per batch: masks = addrop.addrop_masks(...) (not for plain
fine-tuning), the masked forward, cross-entropy, backward, AdamW step, zero_grad; p = 0.7, q = 0.1 (the
RTE setting).
One fixed random batch lives on the device before any clock starts (perf_counter, with a CUDA
synchronize). After warm-up, the methods run in rounds, each method between two plain steps:
plain, ga-first, plain, ga-all, plain, ... A method's ratio in a round is its time over the mean of
those two plain steps, so that a shared machine speeding up or slowing down (other jobs) cancels out;
the table gives each method's median ratio over the rounds, and its median ms. With --compile, a compiled
step (NAME+c) runs between two compiled plain steps, so its ratio is over the plain step of its own kind.

The floor, with F one forward: a plain step is about 3F (the forward, then a backward that computes
gradients for activations and weights). A GA step adds the attribution forward (F) and a backward to
the attention maps only, with no parameter gradients (about F): 5F / 3F = 1.67, for the first layer
or all of them alike (the backward reaches layer 0 either way). AA adds a no-grad forward (4/3), RD
nothing (1). IGA adds the unscaled pass and m scaled passes from layer l up, each forward and back:
(4 + 2m) / 3 for the first layer, (4 + m (L + 1)) / 3 for all L layers. Building the masks (Eq. 6-7)
counts as free. A plain step is not exactly 3F everywhere (AdamW, dropout and the embedding gradient
add to it), so "floor here" counts the same extra forwards at the F measured on this machine, and
"+ masks" adds what building the masks costs here, timed alone (for drop_mask mostly its kthvalue).
Cross-tuning halves the extra over a run: (1 + r) / 2, e.g. 1.33 for GA.

--parts times the pieces of each GA and AA step apart, in the same rounds: the attribution (steps 1-2), the
masks (step 3, from scores at hand) and the masked step (step 4 with the backward and AdamW); what the whole
step takes beyond their sum is printed as the rest (on a GPU, where the 0.3 of a compiled plain step beyond the
floor goes: RESULTS.md, Other ways to find b^[idx]). Beside them it prints the attribution's and the masked step's
FLOPs as torch counts them, x a plain step's, and so the rate at which the attribution runs its products; on a
GPU also each part's GPU time in one call (torch's profiler) against its wall time.
--kernel sort|bisect (with --compile, on a GPU) times each compiled GA and AA step, and the masks, once more with
the masks built by studies/mask_kernel.py's hand-written Triton kernel, in the same rounds.

Last, the data pipeline: examples per second of tokenising and of batching RTE's (else SST-2's) training
set, beside a training step's. --json PATH writes every figure as JSON as well; the tables are printed
either way.
"""

import argparse
import copy
import json
import os
import statistics
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from functools import partial
from pathlib import Path

# run as `python studies/bench.py`: the core (train.py, model.py, ...) is the folder above this one
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from support import cpu
cpu.fair_share()  # before torch loads OpenMP: passive waiting on a busy CPU, else a short spin (cpu.py)

import torch
import torch.nn.functional as F

import addrop
from support import checkpoint
import data
import model as modeling
from bf16_masks import bf16_masks  # --bf16-masks (bf16_masks.py)
import whole_run  # --whole-run (whole_run.py)
from bench_tables import print_busy, print_data, print_hf, print_kernel, print_methods, print_parts  # the tables
from timing import counted_flops, host_syncs, matmul_peak, model_flops, time_rounds  # how it measures (timing.py)
from support import settings
import train

P, Q, M_IG = 0.7, 0.1, 20  # the RTE setting; m, the steps of integrated gradients (Eq. 3)
# name -> (attribution, layers, paper's ratio in Table 7 (BERT-base; the first-layer figures are STS-B's))
METHODS = {"plain": (None, None, "1"), "ga-first": ("ga", "first", "1.95 (STS-B)"), "ga-all": ("ga", "all", "3.58-4.50"),
           "aa-all": ("aa", "all", "1.42-1.94"), "rd-all": ("rd", "all", "1.31-1.42"),
           "iga-first": ("iga", "first", "15.00 (STS-B)"), "iga-all": ("iga", "all", "99.6-125.7")}
TARGETS = {"plain": 1.0, "ga-first": 1.8, "ga-all": 1.8, "aa-all": 1.4, "rd-all": 1.1, "iga-first": 16.0}
MASKS = ("drop_mask", "select", "random_mask")  # the masks alone, timed apart (masks_only)


def extra_and_target(name, L):
    """The forwards F an AD-DROP step adds to a plain step at best (see the docstring), and our target ratio;
    IGA-all's target is 55 on 6 layers, scaled with its floor on other depths."""
    extra = {"plain": 0, "ga-first": 2, "ga-all": 2, "aa-all": 1, "rd-all": 0,
             "iga-first": 1 + 2 * M_IG, "iga-all": 1 + M_IG * (L + 1)}[name]
    return extra, TARGETS.get(name) or 55 / 48 * (1 + extra / 3)


# the flags, in the order --help lists them: (flag, add_argument's keywords)
FLAGS = (
    ("--config", dict(default="minilm", choices=("minilm", "base"),
                      help="minilm: the installed all-MiniLM-L6-v2 weights; base: a random BERT-base-sized model")),
    ("--device", dict(default=None, help="cpu, cuda, cuda:1 ... (default: cuda when available)")),
    ("--batch-size", dict(type=int, default=16, help="B, examples per step")),
    ("--seq-len", dict(type=int, default=128, help="T, tokens per example (a quarter of the rows are padded)")),
    ("--steps", dict(type=int, default=7, help="timed rounds; each method's figures are medians over these")),
    ("--warmup", dict(type=int, default=2, help="untimed rounds first")),
    ("--iga-steps", dict(type=int, default=1, help="of those, how many (the last ones) include IGA, which takes "
                                                   "15-50x a step and skips warm-up")),
    ("--skip-iga", dict(action="store_true", help="leave out both IGA rows")),
    ("--no-hf", dict(action="store_true", help="leave out the Hugging Face comparison")),
    ("--compile", dict(action="store_true", help="also time the steps compiled (train.py --compile: torch.compile, "
                       "CUDA graphs on a GPU), each beside its eager row, and Hugging Face's sdpa step compiled the "
                       "same way")),
    ("--parts", dict(action="store_true", help="also time the parts of each GA and AA step apart, in the same rounds: "
                     "the attribution (NAME:attribution) and the masked step with all layers' masks (masked-all), "
                     "beside the masks alone: where an AD-DROP step's time goes beyond a plain step's")),
    ("--kernel", dict(default=None, choices=("sort", "bisect"), help="with --compile on a GPU, also time each compiled "
                      "GA and AA step, and the masks, with the masks built by studies/mask_kernel.py's Triton kernel "
                      "(NAME/kernel+c), b^[idx] by the sort or by bisection, beside the same steps as train.py builds "
                      "them, in the same rounds")),
    ("--methods", dict(default=None, help="time only these, comma-separated (plain always runs): "
                       + ", ".join(METHODS))),
    ("--data-dir", dict(default=None, help="GLUE folder for the data benchmark (default: $GLUE_DIR, else data/glue)")),
    ("--json", dict(default=None, metavar="PATH", help="also write every figure to PATH as JSON")),
    ("--threads", dict(type=int, default=None, help="torch CPU threads (default: torch's choice); on a CPU shared with "
                       "other jobs 1 can be faster and steadier: every parallel op waits for its slowest thread")),
    ("--seed", dict(type=int, default=0, help="seeds the batch, the fresh weights and the masks")),
    ("--dtype", dict(default="fp32", choices=("fp32", "bf16"), help="bf16: every step under bfloat16 autocast, as "
                     "train.py --dtype bf16 (ours and Hugging Face's)")),
    ("--bf16-masks", dict(action="store_true", help="instead of timing: how often masks from a bf16 attribution pass "
                          "agree with float32's, on real RTE dev batches with the installed all-MiniLM-L6-v2")),
    ("--checkpoint", dict(default=None, metavar="DIR", help="--bf16-masks: a fine-tuned model (train.py's --out; its "
                          "task's dev set is used) instead of MiniLM with a fresh head on RTE")),
    ("--whole-run", dict(action="store_true", help="instead of timing steps: the README's RTE command to the end, eager, "
                         "compiled with a cold cache and with a warm one (studies/whole_run.py; minutes on a GPU)")),
)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kw in FLAGS:
        ap.add_argument(flag, **kw)
    args = ap.parse_args(argv)
    refuse_bad_args(ap, args)
    return args


def refuse_bad_args(ap, args):
    """ap.error (exit 2, the flag named) on bad input, before any model is built; --seq-len against the position
    table is checked in build."""
    if args.kernel and not args.compile:
        ap.error("--kernel: the kernel stands in for the compiled masks; add --compile")
    # make_batch pads a quarter of the rows to between T // 4 and T tokens (T < 4: to none, a NaN row), and the
    # tokenising benchmark needs room for a sentence pair beside the 3 special tokens
    for flag, least in (("batch_size", 1), ("steps", 1), ("iga_steps", 1), ("threads", 1), ("seq_len", 8)):
        if getattr(args, flag) is not None and getattr(args, flag) < least:
            ap.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be at least {least}")
    if not 0 <= args.seed < 2**63:  # torch.manual_seed takes a 64-bit integer
        ap.error(f"--seed {args.seed}: must be in [0, 2**63)")
    if args.warmup < 0:
        ap.error(f"--warmup {args.warmup}: must be at least 0")
    unknown = set((args.methods or "plain").split(",")) - set(METHODS)
    if unknown:
        ap.error(f"--methods: unknown {', '.join(sorted(unknown))}; choose from {', '.join(METHODS)}")
    if args.json is not None:
        out = Path(args.json)
        if out.is_dir():
            ap.error(f"--json {out}: is a folder; pass a file name")
        if not out.parent.is_dir():
            ap.error(f"--json {out}: its folder {out.parent} does not exist")
    try:
        data.resolve_data_dir(args.data_dir)
    except data.DataError as e:
        ap.error(str(e))


def make_batch(cfg, B, T, device, seed):
    """Random ids (not [PAD]), B // 4 rows padded to a random shorter length, random labels; on device."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(cfg.pad_token_id + 1, cfg.vocab_size, (B, T), generator=g)
    lengths = torch.full((B,), T)
    lengths[B - B // 4:] = torch.randint(T // 4, T, (B // 4,), generator=g)
    attention_mask = (torch.arange(T)[None] < lengths[:, None]).long()  # (B, T)
    ids = ids.masked_fill(attention_mask == 0, cfg.pad_token_id)
    batch = {"input_ids": ids, "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(ids),
             "labels": torch.randint(0, 2, (B,), generator=g)}
    return {k: v.to(device) for k, v in batch.items()}


# -----------------------------------------------------------------------------
# the steps timed: each runs under graph_backend, compiled (a backend) or eager (None)

@contextmanager
def graph_backend(backend, new_step=True):
    """For one step: addrop.GRAPH_BACKEND = backend, as train.py --compile sets it (the masks as compiled graphs;
    None: eagerly), set back after. new_step: a compiled model's step first begins a new CUDA graph step."""
    old, addrop.GRAPH_BACKEND = addrop.GRAPH_BACKEND, backend
    if backend and new_step:
        torch.compiler.cudagraph_mark_step_begin()
    try:
        yield
    finally:
        addrop.GRAPH_BACKEND = old


def our_step(net, opt, b, attribution, layers, backend=None, mask=None):
    """One step of train.py's loop (train_step): the masks (addrop.addrop_masks) and dropped_fraction (train.py
    accumulates it every step), then the masked step; backend: that of a model train.compile_model compiled, for
    the masks too (None: eager); mask: a key of addrop.MASKS (None: train.py's default, random for RD)."""
    masks = None
    with graph_backend(backend):
        if attribution is not None:
            mask = mask or ("random" if attribution == "rd" else "high")
            masks = addrop.addrop_masks(net, b, layers, P, Q, attribution, mask=mask, m=M_IG)
            addrop.whole_graph(addrop.dropped_fraction, backend)(masks, b["attention_mask"])
    masked_step(net, opt, b, masks)


def masked_step(net, opt, b, masks, backend=None):
    """Step 4 and the update: the forward with the masks given (None: a plain step), cross-entropy, backward,
    AdamW, zero_grad. backend: as in our_step, which calls it after building its masks."""
    with graph_backend(backend):
        logits, _ = net(b["input_ids"], b["attention_mask"], b["token_type_ids"], masks)
        F.cross_entropy(logits, b["labels"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def attribution_only(net, b, attribution, layers, backend=None):
    """Steps 1-2 alone: the first pass and the attribution of an AD-DROP step, scores left unused."""
    with graph_backend(backend):
        addrop.attribute(net, b, layers, attribution, m=M_IG)


@torch.no_grad()
def forward(net, b, backend=None):
    """F: one forward in eval mode without a graph, the unit of the floor (backend: of a compiled model, as in
    our_step)."""
    with graph_backend(backend):
        net.eval()
        net(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        net.train()


def masks_only(b, scores, kind, backend=None, mask="high"):
    """What the floor counts as free: the masks of all layers from scores at hand (Eq. 6-7), as train.py
    builds them (addrop.layer_masks: with a backend, all layers in one graph), or one compiled graph per layer
    ("drop_mask/layer", the way before), or their selection alone (the kthvalue inside drop_mask), or RD's
    random masks; backend: the torch.compile backend, or None (eager); mask: layer_masks' (--kernel's)."""
    with graph_backend(backend, new_step=False):
        if kind == "drop_mask":  # as train.py builds them: compiled, all layers in one graph
            return addrop.layer_masks(scores, b["attention_mask"], P, Q, mask=mask)
        mask, rd = (addrop.whole_graph(fn, backend) for fn in (addrop.drop_mask, addrop.random_mask))
        for S in scores:
            if kind == "select":
                S.kthvalue(S.size(-1) // 2, dim=-1)
            elif kind == "drop_mask/layer":  # one graph per layer
                mask(S, b["attention_mask"], P, Q)
            else:
                rd(S, b["attention_mask"], P, Q)


def hf_step(net, opt, b):
    logits = net(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"]).logits
    F.cross_entropy(logits, b["labels"]).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def hf_models(cfg, device, compile=False):
    """BertForSequenceClassification of our config, eager and sdpa attention, and with compile the sdpa one
    through torch.compile as train.compile_model compiles ours; {} without transformers."""
    try:
        from transformers import BertConfig, BertForSequenceClassification
    except ImportError:
        return {}
    kw = {k: v for k, v in asdict(cfg).items() if k != "model_type"}
    out = {}
    for impl in ("eager", "sdpa"):
        net = BertForSequenceClassification(BertConfig(**kw, num_labels=2, attn_implementation=impl)).to(device).train()
        out[f"hf-{impl}"] = (net, train.adamw(net, 1e-5, 0.01))
    if compile:
        net = BertForSequenceClassification(BertConfig(**kw, num_labels=2, attn_implementation="sdpa")).to(device).train()
        net.compile(mode="reduce-overhead" if device.type == "cuda" else None)
        out["hf-sdpa+c"] = (net, train.adamw(net, 1e-5, 0.01))
    return out



# -----------------------------------------------------------------------------
# the timing, step by step: build, time in rounds (timing.py), summarise, then the tables and the data pipeline
# (bench_tables.py)

def build(args):
    """The model, its optimizer and one batch on the device, and every step to time by name: the methods, F
    (one forward), the masks alone, and Hugging Face's steps. Returns (device, weights, net, names, steps, hf)."""
    device = settings.pick_device(args.device, 0)  # refuses a bad --device by name
    kernel = args.kernel and kernel_module(device)  # refused before any model is built
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    # no weights needed to time a random BERT-base; the MiniLM folder still lends its (BERT) tokenizer below
    weights = checkpoint.default_weights_dir() if args.config == "minilm" else None
    cfg = checkpoint.read_config(weights / "config.json") if weights else modeling.Config()
    if args.seq_len > cfg.max_tokens:
        sys.exit(f"error: --seq-len {args.seq_len}: the position table of --config {args.config} holds at most "
                 f"{cfg.max_tokens} tokens")
    net = checkpoint.from_pretrained(weights, 2) if weights else modeling.Model(cfg, 2)
    net = net.to(device).train()
    cfg, L, (B, T) = net.cfg, net.cfg.num_hidden_layers, (args.batch_size, args.seq_len)
    opt = train.adamw(net, 1e-5, 0.01)
    batch = make_batch(cfg, B, T, device, args.seed)
    chosen = ["plain", *args.methods.split(",")] if args.methods else METHODS
    names = [n for n in METHODS if n in chosen and not (args.skip_iga and n.startswith("iga"))]
    hf = {} if args.no_hf else hf_models(cfg, device, args.compile)
    steps = {}  # name -> a function that runs one training step
    for n in names:
        attribution, spec, _ = METHODS[n]
        steps[n] = partial(our_step, net, opt, batch, attribution, spec and settings.parse_layers(spec, L))
    steps["forward"] = partial(forward, net, batch)  # F itself, to turn the floor's count of F into a ratio here
    scores = list(addrop.attribute(net, batch, range(L), "aa").values())  # any (B, H, T, T) scores will do
    parts = [n for n in names if args.parts and METHODS[n][0] in ("ga", "aa")]
    all_masks = addrop.addrop_masks(net, batch, range(L), P, Q, "aa") if parts else None  # any masks of every layer
    for n in parts:
        steps[n + ":attribution"] = partial(attribution_only, net, batch, METHODS[n][0],
                                            settings.parse_layers(METHODS[n][1], L))
    if parts:
        steps["masked-all"] = partial(masked_step, net, opt, batch, all_masks)
    steps.update({k: partial(masks_only, batch, scores, k) for k in MASKS})
    if args.compile:
        steps.update(compiled_steps(net, batch, names, parts, all_masks, scores, device))
    if kernel:  # the kernel plugs in as a mask of its own (mask_kernel.py), in place of train.py's "high"
        addrop.MASKS["kernel-" + args.kernel] = kernel.kernel_mask(bisect=args.kernel == "bisect")
        for n in [n for n in steps if n.endswith("+c") and METHODS.get(n[:-2], "-")[0] in ("ga", "aa")] + ["drop_mask+c"]:
            steps[n[:-2] + "/kernel+c"] = partial(steps[n], mask="kernel-" + args.kernel)
    steps.update({n: partial(hf_step, m, o, batch) for n, (m, o) in hf.items()})
    print(f"{args.config}: L={L} C={cfg.hidden_size} H={cfg.num_attention_heads} | batch {B} x {T} ({B // 4} of {B} "
          f"rows padded) | {device}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f} | "
          f"p={P} q={Q} (RTE), IGA m={M_IG}")
    return device, weights, net, names, steps, hf


def kernel_module(device):
    """--kernel: studies/mask_kernel.py, or a stop that says why not (no CUDA GPU, no triton package)."""
    if device.type != "cuda":
        sys.exit(f"error: --kernel runs a Triton kernel, which needs a CUDA GPU (here: {device}); "
                 "studies/mask_kernel_checks.py checks it on a CPU in Triton's interpreter")
    try:
        import mask_kernel  # only here: it needs the triton package, and a GPU to run
    except ImportError as e:
        sys.exit(f"error: --kernel needs the triton package ({e}); pip install triton")
    return mask_kernel


def compiled_steps(net, batch, names, parts, all_masks, scores, device):
    """--compile: the steps of build on a copy of the model compiled as train.py --compile compiles it
    (NAME+c), beside the eager ones, and what their floors count (forward+c, the masks compiled)."""
    L = net.cfg.num_hidden_layers
    net_c = copy.deepcopy(net)
    train.compile_model(net_c, "inductor", device)
    addrop.GRAPH_BACKEND = None  # compile_model sets it for all of train.py's run; here each step sets its own
    opt_c = train.adamw(net_c, 1e-5, 0.01)
    steps = {}
    for n in [n for n in names if not n.startswith("iga")]:  # IGA runs its layers eagerly (addrop.py)
        attribution, spec, _ = METHODS[n]
        steps[n + "+c"] = partial(our_step, net_c, opt_c, batch, attribution, spec and settings.parse_layers(spec, L),
                                  "inductor")
    for n in parts:
        steps[n + ":attribution+c"] = partial(attribution_only, net_c, batch, METHODS[n][0],
                                              settings.parse_layers(METHODS[n][1], L), "inductor")
    if parts:
        steps["masked-all+c"] = partial(masked_step, net_c, opt_c, batch, all_masks, "inductor")
    steps["forward+c"] = partial(forward, net_c, batch, "inductor")  # the floor of a compiled step counts these
    for kind in ("drop_mask", "random_mask", "drop_mask/layer"):
        steps[kind + "+c"] = partial(masks_only, batch, scores, kind, "inductor")
    return steps


def summarise(names, L, times, mems, ratios, syncs, mfu):
    """Medians over the rounds, and a row per method (and per compiled method, NAME+c) beside its target, the
    paper's figure and the floors; a compiled row's "x plain" and target are against the compiled plain step.
    Returns (ms, ratio, MiB, rows), the first three by step name."""
    med = {n: statistics.median(ts) * 1e3 for n, ts in times.items()}  # ms
    ratio = {n: statistics.median(rs) if rs else 1.0 for n, rs in ratios.items()}  # over the neighbour
    spread = {n: (min(rs), max(rs)) if rs else (1.0, 1.0) for n, rs in ratios.items()}  # over the rounds
    mib = {n: None if None in ms else max(ms) / 2**20 for n, ms in mems.items()}
    rows = {}
    for n in [n for n in times if n.removesuffix("+c") in names]:
        base = n.removesuffix("+c")
        c = n[len(base):]  # "" or "+c": a compiled step's floor counts compiled forwards and masks
        plain = "plain" + c
        F_here = ratio["forward" + c]  # one forward as a fraction of a plain step of its kind, on this machine
        extra, tgt = extra_and_target(base, L)
        attribution, spec, paper = METHODS[base]
        masks = 0.0 if attribution is None else (ratio["random_mask" + c] if attribution == "rd" else
                                                 ratio["drop_mask" + c] * (1 if spec == "first" else L) / L)
        rows[n] = {"ms": med[n], "steps": len(times[n]), "ratio": ratio[n], "range": spread[n], "peak_MiB": mib[n], "target": tgt,
                   "paper": paper, "floor": 1 + extra / 3, "floor_here": 1 + extra * F_here,
                   "floor_here_masks": 1 + extra * F_here + masks, "x_plain": ratio[n] if n != plain else 1.0,
                   "host_syncs": syncs.get(n), "mfu": mfu.get(n)}
        rows[n]["pass"] = rows[n]["x_plain"] <= rows[n]["target"]
    return med, ratio, mib, rows


def benchmark(args):
    """Every step timed in rounds, the tables printed; returns the figures (and writes them to --json)."""
    device, weights, net, names, steps, hf = build(args)
    L, B, T = net.cfg.num_hidden_layers, args.batch_size, args.seq_len
    times, mems, ratios = time_rounds(args, steps, device)
    syncs = {n: host_syncs(step, device) for n, step in steps.items()}
    if device.type == "cuda":  # the counter itself, on a step known to wait once
        print(f"host syncs counted on one .item(): {host_syncs(lambda: torch.ones(1, device=device).sum().item(), device)}")
    flops, peak = model_flops(net, B, T), matmul_peak(device, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    mfu = {n: flops / (statistics.median(times[n]) * peak) for n in steps}
    print(f"model FLOPs of a plain step {flops / 1e9:.1f} G (6 per parameter and token, embeddings left out, and "
          f"attention's 12 L T C per token); matmul peak measured here ({args.dtype}): {peak / 1e12:.1f} TFLOP/s; "
          "MFU: those FLOPs per second over the peak, for every method (what it adds is not counted as useful)")
    med, ratio, mib, rows = summarise(names, L, times, mems, ratios, syncs, mfu)
    print_methods(rows, med, ratio, L, device)
    counted = [n for n in steps if n in ("plain", "masked-all") or n.endswith(":attribution")]
    counted = counted if "masked-all" in steps else []
    parts = print_parts(L, med, ratio, METHODS, {n: counted_flops(steps[n]) for n in counted})  # {}: no --parts
    if parts and device.type == "cuda":
        print_busy(steps, med, device)
    kernel = print_kernel(args, med, ratios, syncs)
    result = {"config": args.config, "device": str(device), "threads": torch.get_num_threads(), "B": B, "T": T, "L": L,
              "p": P, "q": Q, "m": M_IG, "forward_ms": med["forward"], "forward_c_ms": med.get("forward+c"), "masks_ms": {k: med[k] for k in med if k.split("+")[0] in MASKS + ("drop_mask/layer",)},
              "methods": rows, "parts": parts, "kernel": kernel, "hf": {}, "data": None}
    result["hf"] = print_hf(args, rows, hf, med, ratio, mib, times)
    result["data"] = print_data(args, weights, B, T, med)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.whole_run:
            whole_run.main([])
        elif args.bf16_masks:
            result = bf16_masks(args, P)
            if args.json:
                Path(args.json).write_text(json.dumps(result, indent=2))
        else:  # bf16: all of it under autocast, as train.py --dtype bf16 runs forwards and backwards
            device_type = "cuda" if (args.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda") else "cpu"
            with torch.autocast(device_type, torch.bfloat16) if args.dtype == "bf16" else nullcontext():
                benchmark(args)
    except (data.DataError, checkpoint.WeightsError) as e:  # they name the file or key: show just that
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()

"""
The paper's analyses in miniature, with plots. Every training run is one train.run() call.

    python experiments.py prior   --data-dir ../shared/glue   # Sec. 2.2, Fig. 2: loss curves of four drop strategies
    python experiments.py grid    --data-dir ../shared/glue   # Fig. 6 p/q heatmap and Fig. 4 cross-tuning ablation
    python experiments.py seeds   --data-dir ../shared/glue   # Tables 3 and 5: mean +- std over seeds, few-shot
    python experiments.py figure1 --data-dir ../shared/glue   # Fig. 1: A, B and the dropped positions of one head
    python experiments.py all     --data-dir ../shared/glue   # the four commands above, one after another

What the cpu presets run, and their wall time on 2 CPU cores shared with other jobs (--threads 1):
    prior    MRPC, first 240 training examples, 5 epochs, 4 runs                           14 min
    grid     SST-2, first 160, 3 epochs, 3x3 grid with and without cross-tuning, 19 runs    17 min
    seeds    SST-2, 16- and 64-shot, 3 seeds, fine-tuning and AD-DROP, 12 runs              15 min
    figure1  SST-2, a model fine-tuned on the first 192 for 2 epochs, then one example       1 min

--scale cpu (the default) runs a miniature with the default all-MiniLM-L6-v2 that finishes in minutes on a
laptop CPU: a few hundred training examples, at most 64 tokens, 3-6 epochs, SST-2 scored on the first 400 of
its 872 dev examples, and lr 1e-4, ten times the paper's 1e-5, which barely moves MiniLM in a few dozen
steps. --scale gpu runs the paper's scale: roberta-base (see weights/README.md), Table 4's settings, full
training sets, the 9x9 grid, 20 epochs with early stopping (patience 5):

    python experiments.py all --scale gpu --data-dir ../shared/glue --out runs/gpu
    python experiments.py seeds --scale gpu --data-dir ../shared/glue --out runs/gpu --task rte --shots full

Any preset can be overridden: --task, --epochs, --limit, --max-len, --lr, --batch-size, --seeds N,
--shots 16,64,256 (or full), --values 0.1,0.5,0.9 (the p and q of the grid), --p/--q (seeds and figure1),
--dev-limit N (0: the whole dev set).

Outputs: under --out, each analysis writes ANALYSIS_TASK.png and ANALYSIS_TASK.csv/.json (the grid: two
figures, _heatmap and _cross_tuning), and keeps one folder per training run in --out/ANALYSIS_TASK/, named by
its settings. A rerun resumes: a run whose metrics.json says "finished" with the same settings is read back,
not retrained; the tables are rewritten after every run, so an interrupted sweep loses no finished run.

Honest reporting: p and q in the grid are picked on the same dev set that is reported (as in the paper),
and every score is the best dev epoch of its run (early stopping on dev, as in the paper).
"""

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

import addrop
import data
import model as modeling
import train

# the miniature (cpu) and the paper's scale (gpu); None means train.py's default (Table 4)
PRESETS = {
    "cpu": {
        "weights": None,  # all-MiniLM-L6-v2
        "prior":   dict(task="mrpc", limit=240, max_len=64, epochs=5, lr=1e-4),
        "grid":    dict(task="sst2", limit=160, max_len=64, epochs=3, lr=1e-4, dev_limit=400,
                        values=[0.1, 0.5, 0.9]),
        "seeds":   dict(task="sst2", shots=[16, 64], seeds=3, max_len=64, epochs=6, lr=1e-4, dev_limit=400),
        "figure1": dict(task="sst2", limit=192, max_len=64, epochs=2, lr=1e-4),
    },
    "gpu": {
        "weights": "roberta-base",
        "prior":   dict(task="mrpc", limit=None, max_len=None, epochs=10, lr=None),
        "grid":    dict(task="rte", limit=None, max_len=None, epochs=20, lr=None,
                        values=[round(0.1 * i, 1) for i in range(1, 10)]),
        "seeds":   dict(task="sst2", shots=[16, 64, 256], seeds=5, max_len=None, epochs=20, lr=None),
        "figure1": dict(task="sst2", limit=None, max_len=None, epochs=2, lr=None),
    },
}
# these args may differ between a finished run and its rerun without making the result stale
IRRELEVANT = ("out", "data_dir", "device", "log_interval", "no_checkpoint", "threads")


def setting(args, analysis, key):
    """A command-line value where one was given, else the preset of --scale."""
    v = getattr(args, key, None)
    return v if v is not None else PRESETS[args.scale][analysis].get(key)


def train_flags(args, analysis, **extra):
    """The train.py flags shared by the runs of one analysis, plus run-specific ones."""
    flags = {"task": setting(args, analysis, "task"), "epochs": setting(args, analysis, "epochs"),
             "limit": setting(args, analysis, "limit"), "max_len": setting(args, analysis, "max_len"),
             "lr": setting(args, analysis, "lr"), "batch_size": args.batch_size,
             "dev_limit": setting(args, analysis, "dev_limit") or None, "threads": args.threads,
             "weights": args.weights or PRESETS[args.scale]["weights"],
             "data_dir": args.data_dir, "device": args.device, **extra}
    argv = []
    for k, v in flags.items():
        if v is True:
            argv.append("--" + k.replace("_", "-"))
        elif v is not None and v is not False:
            argv += ["--" + k.replace("_", "-"), str(v)]
    return argv


def output_base(args, analysis):
    """OUT/ANALYSIS_TASK: the runs go in this folder, the figures and tables next to it with its name."""
    return Path(args.out) / f"{analysis}_{setting(args, analysis, 'task')}"


def model_type(args):
    """bert or roberta: which of Table 4's p, q to use."""
    weights = modeling.resolve_weights(args.weights or PRESETS[args.scale]["weights"])
    if not (weights / "config.json").is_file():
        raise modeling.WeightsError(f"weights: {weights / 'config.json'} does not exist; see weights/README.md")
    return modeling.Config.from_json(weights / "config.json").model_type


def run_once(run_dir, argv, label):
    """One training run into run_dir, or its metrics.json read back if it already finished with the same
    settings. Returns the result dict; a run that train.py stops with an error (a NaN loss) returns
    {"error": ...} and is not retried on a rerun."""
    run_dir = Path(run_dir)
    targs = train.parse_args(argv + ["--out", str(run_dir), "--no-checkpoint", "--log-interval", "1000000"])
    want = {k: v for k, v in vars(targs).items() if k not in IRRELEVANT}
    for name in ("metrics.json", "failed.json"):
        f = run_dir / name
        if f.exists():
            old = json.loads(f.read_text())
            # a flag that train.py gained after the run was written counts as unchanged
            same = all(old["args"].get(k, v) == v for k, v in want.items())
            if same and (name == "failed.json" or old.get("finished")):
                print(f"  {label}: done before, read back from {f}")
                return old
            if not same:
                print(f"  {label}: settings changed since {f} was written; training again")
    print(f"  {label}: training ({' '.join(argv)})", flush=True)
    try:
        return train.run(targs)
    except SystemExit as e:  # train.py exits on a non-finite loss; one diverged run must not end a sweep
        failed = {"args": vars(targs), "error": str(e.code), "best_metric": float("nan"), "history": []}
        run_dir.mkdir(parents=True, exist_ok=True)
        train.write_json(run_dir / "failed.json", failed)
        print(f"  {label}: FAILED: {e.code}")
        return failed


def write_csv(path, rows):
    """Rows (a list of dicts with the same keys) to CSV, through a temporary file like train.write_json."""
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def plt_figure(*a, **kw):
    import matplotlib
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt
    return plt, *plt.subplots(*a, **kw)


def fmt(x, scale=100):
    return "nan" if x is None or not math.isfinite(x) else f"{scale * x:.1f}"

# -----------------------------------------------------------------------------
# 1. the prior experiment (Section 2.2, Figure 2)

STRATEGIES = {  # name -> train.py flags; all in the first layer at rate 0.3 (p=0.3, every candidate dropped)
    "no dropping": dict(p=0),
    "random": dict(p=0.3, q=1.0, attribution="rd"),
    "low attribution": dict(p=0.3, q=1.0, attribution="ga", labels="gold", drop_low=True),
    "high attribution": dict(p=0.3, q=1.0, attribution="ga", labels="gold"),
}


def prior(args):
    base = output_base(args, "prior")
    epochs = setting(args, "prior", "epochs")
    rows, results = [], {}
    for i, (name, flags) in enumerate(STRATEGIES.items(), 1):
        # every epoch drops (no cross-tuning), only the first layer, and no early stop: the full curves
        argv = train_flags(args, "prior", seed=args.seed, layers="first", no_cross_tuning=True,
                           patience=epochs, **flags)
        res = run_once(base / name.replace(" ", "_"), argv, f"[{i}/{len(STRATEGIES)}] {name}")
        results[name] = res
        rows += [{"strategy": name, "epoch": h["epoch"], "train_loss": round(h["train_loss"], 5),
                  "dev_loss": round(h["dev_loss"], 5), "dev_metric": round(h["metric"], 5),
                  "dropped": round(h["dropped"], 4)} for h in res["history"]]
        write_csv(f"{base}.csv", rows)
    plt, fig, axes = plt_figure(1, 2, figsize=(9, 3.4))
    for name, res in results.items():
        ep = [h["epoch"] for h in res["history"]]
        axes[0].plot(ep, [h["train_loss"] for h in res["history"]], marker="o", ms=3, label=name)
        axes[1].plot(ep, [h["dev_loss"] for h in res["history"]], marker="o", ms=3, label=name)
    task = data.get_task(setting(args, "prior", "task")).name
    for ax, what in zip(axes, ("training loss (of the masked forward)", "dev loss")):
        ax.set(xlabel="epoch", ylabel="loss", title=f"{task}: {what}")
        ax.set_xticks(range(1, max(len(r["history"]) for r in results.values()) + 1))
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{base}.png", dpi=110)
    print(f"prior: wrote {base}.png and {base}.csv")
    print(f"  {'strategy':<17} " + " ".join(f"ep{h['epoch']} train/dev" for h in results['no dropping']['history']))
    for name, res in results.items():
        print(f"  {name:<17} " + " ".join(f"{h['train_loss']:.3f}/{h['dev_loss']:.3f}" for h in res["history"]))

# -----------------------------------------------------------------------------
# 2 and 3. p/q sensitivity (Figure 6) and the cross-tuning ablation (Figure 4)

def grid(args):
    base = output_base(args, "grid")
    values = args.values or PRESETS[args.scale]["grid"]["values"]
    task = setting(args, "grid", "task")
    runs = [("baseline", dict(p=0), None, None, None)]
    for ct in (True, False):
        for p in values:
            for q in values:
                name = f"p{p}_q{q}_{'ct' if ct else 'noct'}"
                runs.append((name, dict(p=p, q=q, no_cross_tuning=not ct), p, q, ct))
    rows, ft = [], None  # ft: the plain fine-tuning score
    for i, (name, flags, p, q, ct) in enumerate(runs, 1):
        res = run_once(base / name, train_flags(args, "grid", seed=args.seed, **flags), f"[{i}/{len(runs)}] {name}")
        if name == "baseline":
            ft = res["best_metric"]
            continue
        rows.append({"p": p, "q": q, "cross_tuning": ct, "best_dev": round(res["best_metric"], 5),
                     "minus_baseline": round(res["best_metric"] - ft, 5), "best_epoch": res.get("best_epoch"),
                     "seconds": round(res.get("seconds", 0), 1)})
        write_csv(f"{base}.csv", rows)

    metric = data.get_task(task).metrics[0]
    summary = {"task": task, "metric": metric, "dev_limit": setting(args, "grid", "dev_limit"), "baseline": ft, "values": values,
               "note": "p and q are picked on the same dev set that is reported, as in the paper; "
                       "each score is the best dev epoch of one run (one seed)"}
    for ct in (True, False):
        s = np.array([r["best_dev"] for r in rows if r["cross_tuning"] is ct], dtype=float)
        best = max((r for r in rows if r["cross_tuning"] is ct), key=lambda r: r["best_dev"])
        summary["with" if ct else "without"] = {
            "mean": float(np.nanmean(s)), "std": float(np.nanstd(s)), "min": float(np.nanmin(s)),
            "cells_above_baseline": int((s > ft).sum()), "cells": len(s),
            "best": {"p": best["p"], "q": best["q"], "dev": best["best_dev"]}}
    train.write_json(f"{base}.json", summary)

    # Figure 6: metric minus baseline, rows p, columns q. The paper rescales with MaxAbsScaler to [-1, 1];
    # a colour scale symmetric around 0 shows the same picture, and the cells keep the real points.
    n = len(values)
    D = np.full((2, n, n), np.nan)  # [with, without] cross-tuning, rows p, columns q
    for r in rows:
        D[0 if r["cross_tuning"] else 1, values.index(r["p"]), values.index(r["q"])] = 100 * r["minus_baseline"]
    lim = np.nanmax(np.abs(D)) or 1.0
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
    fig.suptitle(f"{data.get_task(task).name}: AD-DROP minus fine-tuning ({100 * ft:.1f}), dev {metric} points"
                 f"{f' (first {dev_limit} dev examples)' if (dev_limit := setting(args, 'grid', 'dev_limit')) else ''}",
                 fontsize=10)
    fig.savefig(f"{base}_heatmap.png", dpi=100, bbox_inches="tight")

    # Figure 4: one point per (p, q), with and without cross-tuning
    rng = np.random.default_rng(0)
    plt, fig, ax = plt_figure(figsize=(4.2, 3.6))
    for x, ct in enumerate((True, False)):
        s = np.array([100 * r["best_dev"] for r in rows if r["cross_tuning"] is ct])
        ax.scatter(x + rng.uniform(-0.12, 0.12, len(s)), s, s=18, alpha=0.8, color=f"C{x}")
        ax.errorbar(x + 0.25, np.nanmean(s), yerr=np.nanstd(s), fmt="o", color="k", capsize=3, ms=4,
                    label="mean ± std" if x == 0 else None)
    ax.axhline(100 * ft, color="gray", ls="--", lw=1, label=f"fine-tuning {100 * ft:.1f}")
    ax.set_xticks([0, 1], ["with\ncross-tuning", "without\ncross-tuning"])
    ax.set_xlim(-0.5, 1.5)
    ax.set(ylabel=f"dev {metric} (best epoch)")
    ax.set_title(f"{data.get_task(task).name}: every (p, q) of the {n}x{n} grid", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(f"{base}_cross_tuning.png", dpi=110)
    print(f"grid: wrote {base}_heatmap.png, {base}_cross_tuning.png, {base}.csv and {base}.json")
    print(f"  fine-tuning baseline {fmt(ft)}")
    for key in ("with", "without"):
        s = summary[key]
        print(f"  {key:<7} cross-tuning: mean {fmt(s['mean'])} +- {fmt(s['std'])}, min {fmt(s['min'])}, "
              f"{s['cells_above_baseline']}/{s['cells']} cells above FT, best {fmt(s['best']['dev'])} "
              f"at p={s['best']['p']} q={s['best']['q']} (picked on dev)")

# -----------------------------------------------------------------------------
# 4. repeated runs and few-shot (Tables 3 and 5)

def seeds(args):
    base = output_base(args, "seeds")
    task = setting(args, "seeds", "task")
    n_seeds = setting(args, "seeds", "seeds")
    shots_list = args.shots or PRESETS[args.scale]["seeds"]["shots"]
    t4 = train.SETTINGS[task][model_type(args)]  # the p, q of Table 4
    p, q = t4["p"], t4["q"]
    p, q = args.p if args.p is not None else p, args.q if args.q is not None else q
    methods = {"fine-tuning": dict(p=0), f"AD-DROP p={p} q={q}": dict(p=p, q=q)}
    scores = {}  # (method, shots) -> [best dev per seed]
    total, i = len(shots_list) * len(methods) * n_seeds, 0
    for shots in shots_list:
        limit = setting(args, "seeds", "limit")
        col = f"{shots}-shot" if shots != "full" else f"first {limit}" if limit else "full data"
        for method, flags in methods.items():
            for seed in range(n_seeds):
                i += 1
                name = f"{col.replace('-', '')}_{'ft' if flags['p'] == 0 else f'p{p}_q{q}'}_seed{seed}".replace(" ", "")
                argv = train_flags(args, "seeds", seed=seed, shots=None if shots == "full" else shots, **flags)
                res = run_once(base / name, argv, f"[{i}/{total}] {name}")
                scores.setdefault((method, col), []).append(res["best_metric"])
                rows = []
                for (m, c), v in scores.items():
                    s = np.array(v, dtype=float)
                    # the sample std (n - 1) over seeds; one seed has none
                    rows.append({"method": m, "data": c, "seeds": len(s), "mean": round(float(s.mean()), 5),
                                 "std": round(float(s.std(ddof=1)), 5) if len(s) > 1 else float("nan"),
                                 "scores": " ".join(f"{x:.4f}" for x in s)})
                write_csv(f"{base}.csv", rows)
    # Tables 3 and 5 in one: a row per method, a column per data size, mean +- std x100
    cols = list(dict.fromkeys(r["data"] for r in rows))
    cell = {(r["method"], r["data"]): f"{fmt(r['mean'])} ± {fmt(r['std'])}" for r in rows}
    table = ["| method | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    table += [f"| {m} | " + " | ".join(cell[(m, c)] for c in cols) + " |" for m in methods]
    train.write_json(f"{base}.json", {
        "task": task, "metric": data.get_task(task).metrics[0], "dev_limit": setting(args, "seeds", "dev_limit"), "seeds": n_seeds,
        "rows": rows, "table": table,
        "note": f"p={p}, q={q} are Table 4's values for this model type (the paper picked them on dev); "
                "each score is the best dev epoch of its run; in few-shot runs each seed draws other examples"})
    print(f"seeds: wrote {base}.csv and {base}.json; {data.get_task(task).name} dev "
          f"{data.get_task(task).metrics[0]} x100, mean ± std (n-1) over {n_seeds} seeds")
    print("\n".join("  " + line for line in table))

# -----------------------------------------------------------------------------
# 5. Figure 1 for one example

def figure1(args):
    base = output_base(args, "figure1")
    task = setting(args, "figure1", "task")
    ckpt = Path(args.checkpoint) if args.checkpoint else base / "model"
    if not args.checkpoint:  # a short plain fine-tuning, so that the head's prediction means something
        argv = train_flags(args, "figure1", seed=args.seed)
        targs = train.parse_args(argv + ["--out", str(ckpt), "--log-interval", "1000000"])
        done = (ckpt / "metrics.json").exists() and json.loads((ckpt / "metrics.json").read_text()).get("finished")
        if done and (ckpt / "model.safetensors").exists():
            print(f"  figure1: model fine-tuned before, in {ckpt}")
        else:
            print(f"  figure1: fine-tuning a model for the figure ({' '.join(argv)})", flush=True)
            train.run(targs)
    net = modeling.from_pretrained(ckpt, data.num_labels(task)).eval()
    tok = data.load_tokenizer(ckpt, 512)
    dev = data.load_split(task, "dev", data.resolve_data_dir(args.data_dir))
    # one short dev example, so that the token labels stay readable
    lo, hi = 9, 14
    ex = next(e for e in dev if lo <= len(tok.encode(e.text_a, e.text_b).ids) <= hi)
    enc = tok.encode(ex.text_a, ex.text_b)
    batch = {"input_ids": torch.tensor([enc.ids]), "attention_mask": torch.ones(1, len(enc.ids), dtype=torch.long),
             "token_type_ids": torch.tensor([enc.type_ids])}
    t4 = train.SETTINGS[task][net.cfg.model_type]  # the p, q of Table 4
    p, q = t4["p"], t4["q"]
    p, q = args.p if args.p is not None else p, args.q if args.q is not None else q
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
    fig.savefig(f"{base}.png", dpi=90)
    train.write_json(f"{base}.json", {
        "task": task, "text_a": ex.text_a, "text_b": ex.text_b, "tokens": enc.tokens, "layer": layer, "head": head,
        "p": p, "q": q, "seed": args.seed, "gold": labels[ex.label], "pseudo": labels[logits.argmax().item()],
        "A": A.round(decimals=4).tolist(), "B": Bh.round(decimals=6).tolist(), "dropped": drop.int().tolist(),
        "candidates": cand[0, head].int().tolist(), "A_after": Ah2.round(decimals=4).tolist()})
    print(f"figure1: wrote {base}.png and {base}.json ({' '.join(enc.tokens)})")

# -----------------------------------------------------------------------------

def parse_list(kind):
    def parse(s):
        return [v if v == "full" else kind(v) for v in s.split(",")]
    return parse


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("analysis", choices=("prior", "grid", "seeds", "figure1", "all"))
    ap.add_argument("--scale", choices=("cpu", "gpu"), default="cpu", help="the miniature or the paper's scale")
    ap.add_argument("--out", default="runs/exp", help="figures, tables and one folder per run go here")
    ap.add_argument("--data-dir", default=None, help="GLUE folder (default: $GLUE_DIR, else data/glue)")
    ap.add_argument("--weights", default=None, help="weights (default: MiniLM for cpu, roberta-base for gpu)")
    ap.add_argument("--device", default=None, help="cpu, cuda ... (default: cuda when available)")
    ap.add_argument("--task", default=None, help="override the preset task")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--limit", type=int, default=None, help="first N training examples")
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0, help="seed of the prior, grid and figure1 runs")
    ap.add_argument("--values", type=parse_list(float), default=None, help="grid values of p and q, e.g. 0.1,0.5,0.9")
    ap.add_argument("--seeds", type=int, default=None, help="seeds: repeat each setting N times (seeds 0..N-1)")
    ap.add_argument("--shots", type=parse_list(int), default=None, help="seeds: K per class, e.g. 16,64,256 or full")
    ap.add_argument("--p", type=float, default=None, help="seeds/figure1: p (default: the paper's Table 4)")
    ap.add_argument("--q", type=float, default=None, help="seeds/figure1: q (default: the paper's Table 4)")
    ap.add_argument("--checkpoint", default=None, help="figure1: a fine-tuned model folder (default: train one)")
    ap.add_argument("--head", type=int, default=0, help="figure1: which head of the first layer (from 0)")
    ap.add_argument("--dev-limit", type=int, default=None, help="score on the first N dev examples (0: all)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is faster on a busy machine)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for name in (["prior", "grid", "seeds", "figure1"] if args.analysis == "all" else [args.analysis]):
        t0 = time.time()
        dev_limit = setting(args, name, "dev_limit")
        print(f"== {name} ({args.scale} scale{f', dev: first {dev_limit}' if dev_limit else ''}) ==", flush=True)
        try:
            globals()[name](args)
        except (data.DataError, modeling.WeightsError) as e:
            sys.exit(f"error: {e}")
        print(f"== {name}: {time.time() - t0:.0f} s wall ==", flush=True)


if __name__ == "__main__":
    main()

"""
The paper's analyses in miniature, each a plan (the runs) and a report (tables and figures from their results):
the prior experiment (Section 2.2, Figure 2), p/q sensitivity and the cross-tuning ablation (Figures 6 and 4),
repeated runs and few-shot (Tables 3 and 5), and Figure 1 for one example. Every score here is the best dev
epoch of its run, as in the paper; see README.md in this folder.
"""

import math
import sys
from pathlib import Path

import numpy as np
import torch

import addrop
from support import checkpoint
import data
from sweep import (Run, fmt, mean_std, model_config, output_base, plt_figure, save_figure, seed_range, seeds_of,
                   setting, table4_pq, tasks, train_flags, write_csv, write_json)

# -----------------------------------------------------------------------------
# 1. the prior experiment (Section 2.2, Figure 2)

# --drop-low, not --mask low: train.py takes it as --mask low (the same training), and a run's saved flags then
# still match those of the runs made before --mask existed (drop_low true), which a sweep reads back instead of
# training again; --mask low would save drop_low false. RD's mask is --mask random, train.py's default for rd.
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

def grid_values(args):
    return args.values or args.preset["grid"]["values"]


def plan_grid(args):
    task = tasks(args, "grid")[0]
    values = grid_values(args)
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
    ft = results[0]["best_metric"] if results[0] is not None else math.nan  # plain fine-tuning
    rows = [{**r.info, "best_dev": round(res["best_metric"], 5), "minus_baseline": round(res["best_metric"] - ft, 5),
             "best_epoch": res.get("best_epoch"), "seconds": round(res.get("seconds", 0), 1)}
            for r, res in zip(runs[1:], results[1:]) if res is not None]
    write_csv(f"{base}.csv", rows)
    summary = grid_summary(args, task, ft, rows, results)
    write_json(f"{base}.json", summary)
    title = f"{data.get_task(task).name}: AD-DROP minus fine-tuning ({fmt(ft)}), dev {summary['metric']} points" \
            + (f" (first {summary['dev_limit']} dev examples)" if summary["dev_limit"] else "")
    grid_heatmap(rows, summary["values"], title, f"{base}_heatmap.png")
    cross_tuning_figure(rows, ft, task, len(summary["values"]), f"{base}_cross_tuning.png")
    print(f"grid: wrote {base}_heatmap.png, {base}_cross_tuning.png, " + (f"{base}.csv and " if rows else "")
          + f"{base}.json" + ("" if rows else " (no finished runs yet, so no CSV)"))
    print(f"  fine-tuning baseline {fmt(ft)}")
    for key in ("with", "without"):
        s = summary[key]
        best = f"best {fmt(s['best']['dev'])} at p={s['best']['p']} q={s['best']['q']} (picked on dev)" \
            if s["best"] else "no cell finished"
        print(f"  {key:<7} cross-tuning: mean {fmt(s['mean'])} +- {fmt(s['std'])}, min {fmt(s['min'])}, "
              f"{s['cells_above_baseline']}/{s['cells']} cells above FT, {best}")


def grid_summary(args, task, ft, rows, results):
    """grid's JSON: per cross-tuning setting, the spread of the cells and the best one (picked on dev)."""
    summary = {"task": task, "metric": data.get_task(task).metrics[0], "dev_limit": setting(args, "grid", "dev_limit"),
               "baseline": ft, "values": grid_values(args), "cells_missing": sum(res is None for res in results[1:]),
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
    return summary


def grid_heatmap(rows, values, title, path):
    """Figure 6: metric minus baseline, rows p, columns q. The paper rescales with MaxAbsScaler to [-1, 1];
    a colour scale symmetric around 0 shows the same picture, and the cells keep the real points."""
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
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=100, bbox_inches="tight")


def cross_tuning_figure(rows, ft, task, n, path):
    """Figure 4: one point per (p, q), with and without cross-tuning."""
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
    ax.set(ylabel=f"dev {data.get_task(task).metrics[0]} (best epoch)")
    ax.set_title(f"{data.get_task(task).name}: every (p, q) of the {n}x{n} grid", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)

# -----------------------------------------------------------------------------
# 4. repeated runs and few-shot (Tables 3 and 5)

def plan_seeds(args):
    task = tasks(args, "seeds")[0]
    p, q = table4_pq(args, task)
    limit = setting(args, "seeds", "limit")
    runs = []
    for shots in args.shots or args.preset["seeds"]["shots"]:
        col = f"{shots}-shot" if shots != "full" else f"first {limit}" if limit else "full data"
        for method, flags in {"fine-tuning": dict(p=0), f"AD-DROP p={p} q={q}": dict(p=p, q=q)}.items():
            for seed in seeds_of(args, "seeds"):
                name = f"{col.replace('-', '')}_{'ft' if flags['p'] == 0 else f'p{p}_q{q}'}_seed{seed}".replace(" ", "")
                argv = train_flags(args, "seeds", task, seed=seed, shots=None if shots == "full" else shots, **flags)
                runs.append(Run(name, argv, {"method": method, "data": col, "p": p, "q": q, "seed": seed}))
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
    n_seeds, used = setting(args, "seeds", "seeds"), seed_range(seeds_of(args, "seeds"))
    p, q = runs[0].info["p"], runs[0].info["q"]
    write_json(f"{base}.json", {
        "task": task, "metric": data.get_task(task).metrics[0], "dev_limit": setting(args, "seeds", "dev_limit"),
        "seeds": n_seeds, "seed_range": used, "rows": rows, "table": table,
        "note": f"p={p}, q={q} are Table 4's values for this model type (the paper picked them on dev); "
                "each score is the best dev epoch of its run; in few-shot runs each seed draws other examples"})
    print(f"seeds: wrote {base}.csv and {base}.json; {data.get_task(task).name} dev "
          f"{data.get_task(task).metrics[0]} x100, mean ± std (n-1) over {n_seeds} seeds ({used})")
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
    net = checkpoint.from_pretrained(ckpt, data.num_labels(task)).eval()
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
    pseudo = labels[logits.argmax().item()]
    title = (f"{data.get_task(task).name} dev example, layer {layer}, head {head} (from 0): "
             f"{drop.sum().item()} of {len(enc.tokens) ** 2} positions dropped; gold label '{labels[ex.label]}'")
    figure1(enc.tokens, A, Bh, cand[0, head], drop, Ah2, p, q, pseudo, title, f"{base}.png")
    write_json(f"{base}.json", {
        "task": task, "text_a": ex.text_a, "text_b": ex.text_b, "tokens": enc.tokens, "layer": layer, "head": head,
        "p": p, "q": q, "seed": args.seed, "gold": labels[ex.label], "pseudo": pseudo,
        "A": A.round(decimals=4).tolist(), "B": Bh.round(decimals=6).tolist(), "dropped": drop.int().tolist(),
        "candidates": cand[0, head].int().tolist(), "A_after": Ah2.round(decimals=4).tolist()})
    print(f"figure1: wrote {base}.png and {base}.json ({' '.join(enc.tokens)})")


def figure1(tokens, A, Bh, cand, drop, Ah2, p, q, pseudo, title, path):
    """Four panels of one head, each (T, T): attention A, attribution B, A with the candidates (boxed) and
    the dropped positions (x), and the attention of the second forward, after dropping."""
    plt, fig, axes = plt_figure(1, 4, figsize=(15, 4.3))
    T = len(tokens)
    panels = [(A, "Blues", "(a) attention A"),
              (Bh, "RdBu_r", f"(b) attribution B = dF/dA\n(pseudo label '{pseudo}')"),
              (A, "Blues", f"(c) candidates (top p={p}, boxed)\nand dropped (x, q={q})"),
              (Ah2, "Blues", "(d) attention after dropping\n(second forward)")]
    for ax, (X, cmap, name) in zip(axes, panels):
        X = X.numpy()
        lim = np.abs(X).max()
        ax.imshow(X, cmap=cmap, vmin=-lim if cmap == "RdBu_r" else 0, vmax=lim)
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(T), tokens, fontsize=7)
    for i in range(T):
        for j in range(T):
            if cand[i, j]:
                axes[2].add_patch(plt.Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, ec="red", lw=1, ls=":"))
            if drop[i, j]:
                axes[2].plot(j, i, "x", color="red", ms=5, mew=1.2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=90)

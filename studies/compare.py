"""
Does AD-DROP help? compare's runs, its statistics and its tables: every arm (plain fine-tuning, AD-DROP with GA,
GA-train, RD or AA attribution, R-Drop) on the same seeds, every setting fixed before the runs, the best epoch
picked on a holdout split of the training set and the dev set only reported; a regime check says per task whether
the question has an answer at this scale (plain fine-tuning learns it and overfits it). See README.md here.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

import data
from sweep import (Run, fmt, mean_std, plt_figure, save_figure, seed_range, seeds_of, setting, table4_pq, tasks,
                   train_flags, write_csv, write_json)


# R-Drop (Liang et al., NeurIPS 2021), the regulariser AD-DROP has to beat: the loss of two forwards with their own
# dropout, plus alpha times the symmetric KL of their predictions, 1/2 (KL(P1||P2) + KL(P2||P1)) (their Eq. 3).
# For GLUE they tuned alpha per task over {0.1, 0.5, 1.0} and published no per-task value; the GLUE criterion of
# their released code (fairseq_src/examples/roberta, reg_sentence_prediction) defaults to 1.0 and their GLUE run
# script sets no other. We take 1.0: the one value their public GLUE runs use, and the strongest of the three, for
# runs chosen to overfit. Their loss sums the two passes' cross-entropies; train.py averages them, so its --rdrop
# is half the paper's alpha for the same balance (Adam does not see the overall factor of 2).
RDROP_ALPHA = 1.0
# the arms: name -> (run folder and --methods key, train.py flags). Every AD-DROP arm takes Table 4's p and q for
# the task and model type and train.py's per-task layers (Section 3.2); fine-tuning and R-Drop drop no attention.
ARMS = {
    "fine-tuning": ("ft", dict(p=0)),
    "GA": ("ga", dict(attribution="ga")),
    # the authors' code's first pass: training mode, dropout on, A taken after attention dropout (train.py --first-pass train)
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


def t_cdf(x, df):
    """Student's t CDF with df degrees of freedom at x: 1/2 plus Simpson's rule over the density from 0 (no
    scipy here). The density c (1 + t^2/df)^(-(df+1)/2) is integrated in the angle u = atan(t / sqrt(df)), where
    it becomes c sqrt(df) cos(u)^(df-1) on [0, pi/2): a bounded interval and a smooth integrand, so 2000
    intervals are as exact far out in the tail (the huge t of differences that hardly vary) as near 0."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    end = math.atan(abs(x) / math.sqrt(df))
    u = np.linspace(0.0, end, 2001)  # 2000 intervals, h = end / 2000
    f = c * math.sqrt(df) * np.cos(u) ** (df - 1)
    area = end / 6000 * (f[0] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum() + f[-1])
    return 0.5 + math.copysign(area, x)


def t_quantile(prob, df):
    """The prob-quantile of Student's t with df degrees of freedom, for prob in [0.5, 1): bisection on t_cdf."""
    lo, hi = 0.0, 100.0  # t_{0.995, 1} = 63.7
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < prob else (lo, mid)
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
    and Spearman, 0, what data.py gives a constant prediction; entity F1 (NER), 0, answering O (no entity)
    everywhere (a constant B-PER would catch the one-word names and score a little above 0)."""
    if data.get_task(task).token_level:
        return 0.0
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
    A task that fails either is 'not informative at this scale': its rows are reported apart, not as evidence.
    No finished run, or no baseline (its dev set not found): 'unknown'."""
    scores = {s: score(res) for s, res in ft.items()}
    over = {s: overfits(res["history"]) for s, res in ft.items()}
    n = len(scores)
    out = {"n": n, "baseline": baseline, "mean": mean_std(scores.values())[0] if n else None,
           "min": min(scores.values()) if n else None, "scores": scores, "overfit_by_seed": over,
           "overfit_seeds": sum(over.values()), "learns": None, "overfits": None, "informative": None}
    if n == 0:
        return {**out, "label": "unknown", "verdict": "unknown: no fine-tuning run has finished"}
    out["overfits"] = 2 * out["overfit_seeds"] > n
    if baseline is None:  # a missing file says nothing about the task: no verdict rather than a wrong one
        return {**out, "label": "unknown", "verdict": "unknown: its dev set could not be read for the constant "
                                                       "baseline (set GLUE_DIR or --data-dir)"}
    why = [] if out["overfits"] else [f"does not overfit: {out['overfit_seeds']} of {n} seeds"]
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
    methods = [ARM_NAMES[k] for k in args.methods or args.preset[analysis]["methods"]]
    return base, [r for task in tasks(args, analysis) for r in task_runs(args, analysis, task, methods)]


def task_runs(args, analysis, task, methods, tag="", **extra):
    """The runs of one task, seed by seed (seeds_of), arm by arm in the order of methods (arm names): each
    arm's flags, Table 4's p and q for the AD-DROP arms, PAWS for a paraphrase task, then extra (train.py
    flags of every run of the task). tag goes into the folder names (confirm's NER size: ft_n1000_seed100)."""
    p, q = table4_pq(args, task)  # fixed before any run, never chosen on the reported dev set
    runs = []
    for seed in seeds_of(args, analysis, task):
        for method in methods:
            key, flags = ARMS[method]
            flags = {**flags, **(dict(p=p, q=q) if "attribution" in flags else {}),
                     **(dict(ood=OOD[task]) if task in OOD else {}), **extra}
            runs.append(Run(f"{task}/{key}{tag}_seed{seed}", train_flags(args, analysis, task, seed=seed, **flags),
                            {"task": task, "method": method, "seed": seed, "p": flags.get("p", 0),
                             "q": flags.get("q", 0), "alpha": RDROP_ALPHA if flags.get("rdrop") else 0}))
    return runs


def preset_of_folder(args, analysis, base):
    """compare.json names the preset its runs were made with. Another preset writing into the same folder would
    train its own runs over them (the run folders share names): refused. A compare.json that names no preset is
    compare_small's, the one compare whose tables were written without the name."""
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
    if data.get_task(task).token_level:  # no labels needed: 0
        return constant_baseline(task, [])
    try:
        dev = data.load_split(task, "dev", data.resolve_data_dir(args.data_dir))
    except data.DataError as e:
        print(f"warning: {task}: no regime check without its dev set: {e}", file=sys.stderr)
        return None
    limit = setting(args, analysis, "dev_limit", task)
    if limit and setting(args, analysis, "limit_first", task):
        dev = dev[:limit]
    return constant_baseline(task, [e.label for e in dev])


def dev_score(res):
    return res.get("dev_at_best", res["best_metric"])  # dev at the best holdout epoch


def ood_score(res):
    return (res.get("ood") or {}).get("accuracy")  # the same weights on PAWS-Wiki test


def predicted(split):
    """The score of a token task's run on a whole split (conll2003's dev or test) that --predict scored with the
    weights of the best holdout epoch: its entity F1 (metrics.entity_scores' "f1"); None where it has none."""
    return lambda res: ((res.get("predictions") or {}).get(split) or {}).get("f1")


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
    """compare's tables, JSON and figure from the finished runs of the requested seed range alone: runs of
    other seeds in the same folder (another --first-seed or --seeds) are not counted."""
    analysis = base.name
    wanted = {task: set(seeds_of(args, analysis, task)) for task in tasks(args, analysis)}
    used = seed_range(set().union(*wanted.values()))
    kept = [(r, res) for r, res in zip(runs, results) if r.info["seed"] in wanted.get(r.info["task"], ())]
    done = {}  # task -> method -> seed -> result
    for r, res in kept:
        done.setdefault(r.info["task"], {}).setdefault(r.info["method"], {})
        if res is not None and not res.get("error"):
            done[r.info["task"]][r.info["method"]][r.info["seed"]] = res
    info = {(r.info["task"], r.info["method"]): r.info for r, _ in kept}
    regimes = {task: regime_check(by_method.get("fine-tuning", {}), dev_baseline(args, analysis, task), dev_score)
               for task, by_method in done.items()}
    summary, epochs = [], []
    for task, by_method in done.items():
        summary += arm_rows(task, task, by_method, dev_score, info, regimes[task])
        if task in OOD:
            summary += arm_rows(task, OOD[task], by_method, ood_score, info, regimes[task])
        epochs += epoch_rows(task, by_method)
    ranged = lambda rows: [{**row, "seed_range": used} for row in rnd(rows)]  # rounded, each naming its seeds
    write_csv(f"{base}.csv", ranged(summary))
    write_csv(f"{base}_runs.csv", [run_row(r, res) for r, res in kept if res is not None and not res.get("error")])
    write_csv(f"{base}_epochs.csv", ranged(epochs))
    constant = ood_constant(args, done)
    table = compare_table(summary, epochs, regimes, constant, used)
    pq = {r.info["task"]: (r.info["p"], r.info["q"]) for r, _ in kept if r.info["p"]}
    write_json(f"{base}.json", {
        "preset": f"{args.scale}/{analysis}", "seed_range": used,
        "tasks": {t: {"metric": data.get_task(t).metrics[0], **dict(zip("pq", pq.get(t, (None, None)))),
                      **({"ood": OOD[t]} if t in OOD else {})} for t in done},
        "regime": {t: {**rnd([g])[0], "scores": rnd([g["scores"]])[0]} for t, g in regimes.items()},
        "ood_constant_accuracy": {name: rnd([shares])[0] for name, shares in constant.items()},
        "summary": ranged(summary), "epochs": ranged(epochs), "table": table, "runs_missing": sum(res is None for _, res in kept),
        "note": NOTE})
    compare_figure(figure_columns(done, epochs, regimes), f"{base}.png", used)
    print(f"{analysis}: wrote {base}.png, {base}.csv, {base}_runs.csv, {base}_epochs.csv and {base}.json\n")
    print("\n".join(table))


NOTE = ("each score is the dev metric at the epoch with the best holdout metric (dev is only reported); PAWS "
        "rows: the same weights on PAWS-Wiki test; p and q are Table 4's for the model type, fixed before "
        f"any run; R-Drop's alpha {RDROP_ALPHA} (the paper's scale); a difference is the arm minus "
        "fine-tuning on the same seed; CI: mean +- t_{0.975,n-1} sd/sqrt(n); seeds_needed: the smallest n "
        "with n >= ((t_{0.975,n-1} + t_{0.8,n-1}) sd/mean)^2 (a paired t-test at 80% power); regime: from "
        f"the fine-tuning runs alone, learns = mean dev at least {100 * LEARN_MARGIN:g} points above the best "
        "constant prediction and every seed above it, overfits = in more than half the seeds dev loss ends "
        f"{100 * OVERFIT_RISE:g}% above its lowest while train loss ends below its value there; the train "
        "loss of an AD-DROP epoch is that of its masked forward, so its gap is not a plain one")


def rnd(rows):
    return [{k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()} for row in rows]


def run_row(r, res):
    """One finished run's line of compare_runs.csv."""
    return {"task": r.info["task"], "method": r.info["method"], "seed": r.info["seed"],
            "dev_at_best": round(dev_score(res), 5), "best_epoch": res.get("best_epoch"),
            "selection": res.get("selection", "dev"), "selection_metric": round(res["best_metric"], 5),
            "epochs": len(res["history"]), "overfits": overfits(res["history"]),
            **({f"ood_{k}": round(res["ood"][k], 5) for k in ("accuracy", "f1") if k in res["ood"]}
               if res.get("ood") else {}),
            **{name: round(v, 5) for split, name in (("dev", "full_dev_f1"), ("test", "test_f1"))
               if (v := predicted(split)(res)) is not None}, "seconds": round(res.get("seconds", 0), 1)}


def ood_constant(args, done):
    """For the out-of-distribution rows, what answering one label everywhere scores (PAWS: 55.8 always 0):
    set name -> label -> accuracy; a set that cannot be read is left out."""
    constant = {}
    for name in dict.fromkeys(OOD[t] for t in done if t in OOD):
        try:
            y = np.array([e.label for e in data.load_split(name, "test", data.resolve_data_dir(args.data_dir))])
        except data.DataError:
            continue
        constant[name] = {label: float(np.mean(y == i)) for i, label in enumerate(data.get_task(name).labels)}
    return constant


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


def compare_table(summary, epochs, regimes, constant=None, seeds=None):
    """The Markdown for the README: the seeds it is over (seeds, e.g. 'seeds 0-7'); the regime check per task;
    the scores and paired differences, the tasks where fine-tuning learns and overfits apart from the rest;
    then dev loss per epoch."""
    lines = [f"{seeds}, each one shared by every arm of a task", ""] if seeds else []
    lines += regime_table(regimes)
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
    return lines + [""] + loss_table(epochs)


def regime_table(regimes):
    """The regime check per task (task -> regime_check's answer), as Markdown lines."""
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
    return lines


def loss_table(epochs):
    """epoch_rows as Markdown lines: dev loss per epoch of fine-tuning, and of each other arm its paired
    difference from fine-tuning."""
    lines = ["dev loss per epoch, mean over seeds (fine-tuning), and the paired difference from fine-tuning "
             "(the other arms; below 0: lower dev loss), over the seeds that reached the epoch (– where none did: "
             "no fine-tuning seed, or for a difference no seed in both arms); last column: dev - train loss at the "
             "last epoch",
             "", "| task | method | dev loss by epoch | dev - train loss |", "|---|---|---|---|"]
    by = {}
    for e in epochs:
        by.setdefault((e["task"], e["method"]), []).append(e)
    for (task, method), es in by.items():
        ft = method == "fine-tuning"
        curve = " ".join(num(e["dev_loss"] if ft else e["dev_loss_minus_ft"], 1, "" if ft else "+", ".3f")
                         for e in es)  # –: no seed (of fine-tuning, or of both arms) reached that epoch
        lines.append(f"| {data.get_task(task).name} | {method} | {curve} | {es[-1]['gap']:.3f} |")
    return lines


def views(task):
    """What compare's figure shows of a task: (title, metric, score) per column; the first, dev, with its dev loss
    curves below; then the out-of-distribution set (PAWS test) of a paraphrase task."""
    t, e = data.get_task(task), data.get_task(OOD.get(task, task))
    return [(f"{t.name} dev", t.metrics[0], dev_score)] + \
        ([(f"{t.name}-trained, {e.name} test", e.metrics[0], ood_score)] if task in OOD else [])


def regime_note(regime):
    """The line under a panel's title: nothing for an informative task, else what the regime check said."""
    if regime["label"] == "unknown":
        return "\nregime unknown: " + ("no fine-tuning run yet" if regime["n"] == 0 else "dev set not read")
    return "" if regime["informative"] else "\nnot informative at this scale"


def figure_columns(done, epochs, regimes, views=views):
    """One figure column per view of a task (views(task): title, metric, score): the paired differences of each
    arm from fine-tuning (points), and under the first view the mean dev loss per epoch per arm."""
    columns = []
    for task, by_method in done.items():
        for i, (title, metric, score) in enumerate(views(task)):
            ft = {s: v for s, res in by_method.get("fine-tuning", {}).items() if (v := score(res)) is not None}
            diffs = {}
            for method, by_seed in by_method.items():
                if method != "fine-tuning":
                    vals = {s: v for s, res in by_seed.items() if (v := score(res)) is not None}
                    diffs[method] = [vals[s] - ft[s] for s in sorted(set(vals) & set(ft))]
            columns.append({
                "title": f"{title}: {len(ft)} seeds" + regime_note(regimes[task]),
                "ylabel": f"{metric} minus fine-tuning\n(points, same seed)", "diffs": diffs,
                "informative": bool(regimes[task]["informative"]),
                "losses": None if i else {m: [(x["epoch"], x["dev_loss"]) for x in epochs
                                              if x["task"] == task and x["method"] == m] for m in by_method}})
    return columns


def compare_figure(columns, path, seeds=None):
    """Per column on top the paired differences from fine-tuning, a dot per seed, the mean with its 95% interval,
    and the zero line (greyed where the task is not informative at this scale); below, mean dev loss per epoch.
    seeds (e.g. 'seeds 0-7') heads the title."""
    plt, fig, axes = plt_figure(2, max(len(columns), 1), figsize=(max(3.8 * len(columns), 8), 6.8), squeeze=False)
    rng = np.random.default_rng(0)
    for col, c in enumerate(columns):
        differences_panel(axes[0, col], c, rng)
        losses_panel(axes[1, col], c["losses"], col)
    axes[0, 0].legend(fontsize=8, loc="lower left")
    fig.suptitle((f"{seeds}\n" if seeds else "") + "each arm minus plain fine-tuning on the same seed, at the best "
                 "holdout epoch (top);\nmean dev loss per epoch (bottom)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def differences_panel(ax, c, rng):
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


def losses_panel(ax, losses, col):
    """Mean dev loss per epoch per arm; None for an out-of-distribution column, which is scored once."""
    if losses is None:
        ax.axis("off")
        ax.text(0.5, 0.5, "scored once, with the weights\nof the best holdout epoch", ha="center",
                va="center", fontsize=8, color="gray", transform=ax.transAxes)
        return
    for method, points in losses.items():
        ax.plot([e for e, _ in points], [v for _, v in points], marker="o", ms=3, label=method,
                color="k" if method == "fine-tuning" else f"C{list(ARMS).index(method)}")
    ax.set(xlabel="epoch", ylabel="mean dev loss" if col == 0 else None)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)

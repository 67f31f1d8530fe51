"""
The preregistered few-shot study (preregistration_fewshot.md, fixed before any of its runs): does AD-DROP help
more when data is scarce (the paper's Table 5)? First the pilot, fine-tuning only, whose rules (below, as the
preregistration words them) fix the learning rate, the step budget, the CoLA rows and the number of seeds; then
the confirmatory runs on fresh seeds and their report: H5-H7, GA minus fine-tuning on SST-2 at 16, 64 and 256
examples per class, H8, the gain at 16 minus the gain at 256 on the same seed, each a paired two-sided t-test,
Holm over the four (confirm.py's statistics).

Every run follows the few-shot convention of LM-BFF (Gao et al. 2021): K examples per class to train on, K other
examples per class held out to pick the epoch (train.py --shots K --shots-holdout), a fixed budget of optimizer
steps at batch 8, and the full dev set scored once, with the held-out-best epoch's weights (--dev-once); ties in
the held-out score go to the epoch with the lower held-out loss (--tie-break loss).
"""

import json
import math
import sys
from pathlib import Path

import numpy as np

import compare
import confirm
import data
from sweep import Run, atomic_write, mean_std, plt_figure, save_figure, seed_range, seeds_of, setting, table4_pq, \
    tasks, train_flags, write_csv, write_json

PAPER_GAINS = {16: 5.7, 64: 2.6, 256: 1.2}  # Table 5, RoBERTa-base SST-2, AD-DROP minus fine-tuning, points
HYPOTHESES = [("H5", 16), ("H6", 64), ("H7", 256)]  # GA minus fine-tuning on SST-2 at K shots (expected: above)
SHRINK = ("H8", 16, 256)  # the gain at 16 shots minus the gain at 256 on the same seed (expected: above 0)
# the pilot's rules, fixed in preregistration_fewshot.md
BUDGET_SLACK = 1.0     # points: the smaller step budget is taken when its mean held-out score is within this
COLA_MCC = 0.10        # CoLA's row at K runs when every pilot seed's dev MCC reaches this
MIN_SEEDS, MAX_SEEDS = 32, 48
POWER_LEVEL = 0.0125   # Holm's strictest level over four hypotheses: 0.05 / 4
HOURS = 6.0            # the wall-time target on two single-threaded shards
SHARDS = 2
# training cost of an arm relative to fine-tuning (bench.py's MiniLM steps, AD-DROP every other epoch: GA in the
# first layer 1.67 plain steps -> 1.34, in all layers 1.90 -> 1.45; RD 1.11 -> 1.06)
ARM_COST = {"fine-tuning": 1.0, "GA": {"first": 1.34, "all": 1.45}, "RD": 1.06}


def few_flags(task, shots, lr, steps, batch_size):
    """train.py's flags of one few-shot run: K per class to train on and K held out, `steps` optimizer steps
    (epochs enough to reach them, no early stop), dev scored once, ties broken by held-out loss."""
    per_epoch = math.ceil(data.num_labels(task) * shots / batch_size)
    epochs = math.ceil(steps / per_epoch)
    return dict(shots=shots, shots_holdout=True, lr=lr, batch_size=batch_size, max_steps=steps, epochs=epochs,
                patience=epochs, dev_once=True, tie_break="loss", no_epoch_state=True, holdout=None, limit=None)

# -----------------------------------------------------------------------------
# the pilot: fine-tuning at every K and learning rate; its rules pick lr, the budget, CoLA's rows and n

def plan_pilot(args):
    """Fine-tuning on each task at each K and lr, seed by seed, each run to the largest budget."""
    base = Path(args.out) / "fewshot_pilot"
    p = args.preset["fewshot_pilot"]
    runs = []
    for task in tasks(args, "fewshot_pilot"):
        for seed in seeds_of(args, "fewshot_pilot", task):
            for shots in p["tasks"][task]["shots"]:
                for lr in p["lrs"]:
                    flags = few_flags(task, shots, lr, max(p["budgets"]), p["batch_size"])
                    runs.append(Run(f"{task}/ft_k{shots}_lr{lr:g}_seed{seed}",
                                            train_flags(args, "fewshot_pilot", task, seed=seed, p=0, **flags),
                                            {"task": task, "method": "fine-tuning", "seed": seed, "shots": shots,
                                             "lr": lr}))
    return base, runs


def held_out_best(res, steps):
    """The held-out score of the epoch that --tie-break loss selects among those that end by `steps` optimizer
    steps (the run's own selection when steps is its budget): a run with a constant lr is, up to that step,
    the run with the smaller budget."""
    per_epoch = len(res["history"][0]["step_losses"])
    kept = [h for h in res["history"] if h["epoch"] * per_epoch <= steps] or res["history"][:1]
    best = min(kept, key=lambda h: (-h["holdout_metric"], h["holdout_loss"], h["epoch"]))
    return best["holdout_metric"]


def needed_seeds(sd, gain, level=POWER_LEVEL):
    """The smallest n whose paired t-test at `level` finds `gain` with 80% power at paired sd `sd`:
    (t(1 - level/2, n-1) + t(0.8, n-1)) sd / sqrt(n) <= gain; math.inf when no n up to 10,000 does."""
    if not sd > 0:
        return 2
    for n in range(2, 10_001):
        if detectable(sd, n, level) <= gain:
            return n
    return math.inf


def detectable(sd, n, level=POWER_LEVEL):
    """The smallest true mean difference a two-sided paired t-test at `level` finds with 80% power."""
    return (compare.t_quantile(1 - level / 2, n - 1) + compare.t_quantile(0.8, n - 1)) * sd / math.sqrt(n)


def pilot_rule(args, runs, results):
    """The preregistered rules, applied to the finished pilot runs. Per task: lr, the one with the higher mean
    held-out score over every K and seed at the largest budget (a tie: the smaller lr); the budget, the smaller
    one when its mean held-out score (selection within its steps) is within BUDGET_SLACK points of the larger
    one's, else the larger; per K at that lr: dev mean and sd, the regime (learns), and for CoLA whether the row
    runs (every seed's MCC at least COLA_MCC). Then n, the seeds: at least MIN_SEEDS, as many as the paper's
    16- and 64-shot gains need at 80% power at Holm's strictest level with the paired sd sqrt(2) times the
    fine-tuning sd (no correlation between arms assumed: an upper bound where it is positive), at most
    MAX_SEEDS; and the cost of the confirmatory sweep, cut by the preregistered order if above HOURS."""
    p = args.preset["fewshot_pilot"]
    done = [(r, res) for r, res in zip(runs, results) if res is not None and not res.get("error")]
    out = {"complete": len(done) == len(runs), "tasks": {}, "runs_finished": len(done), "runs_planned": len(runs)}
    for task in tasks(args, "fewshot_pilot"):
        mine = [(r, res) for r, res in done if r.info["task"] == task]
        big, small = max(p["budgets"]), min(p["budgets"])
        by_lr = {lr: [res for r, res in mine if r.info["lr"] == lr] for lr in p["lrs"]}
        held = {lr: 100 * mean_std([held_out_best(res, big) for res in v])[0] for lr, v in by_lr.items() if v}
        if not held:
            continue
        lr = min(held, key=lambda x: (-held[x], x))
        at_small = 100 * mean_std([held_out_best(res, small) for res in by_lr[lr]])[0]
        steps = small if at_small >= held[lr] - BUDGET_SLACK else big
        baseline = compare.dev_baseline(args, "fewshot_pilot", task)
        per_k = {}
        for shots in p["tasks"][task]["shots"]:
            scores = [res["dev_at_best"] for r, res in mine if r.info["lr"] == lr and r.info["shots"] == shots]
            secs = [res["seconds"] for r, res in mine if r.info["shots"] == shots]
            mean, sd = mean_std(scores)
            learns = None if baseline is None or not scores else \
                bool(mean >= baseline + compare.LEARN_MARGIN and min(scores) > baseline)
            per_k[shots] = {"n": len(scores), "dev_mean": mean, "dev_sd": sd, "dev_min": min(scores, default=None),
                            "learns": learns, "seconds": mean_std(secs)[0] * steps / big if secs else math.nan,
                            "paired_sd": 100 * math.sqrt(2) * sd if len(scores) > 1 else math.nan}
            if task == "cola":
                per_k[shots]["runs"] = bool(scores) and min(scores) >= COLA_MCC
        out["tasks"][task] = {"lr": lr, "steps": steps, "held_out_by_lr": held, "held_out_small_budget": at_small,
                              "baseline": baseline, "shots": per_k}
    sst2 = out["tasks"].get("sst2", {}).get("shots", {})
    need = {k: needed_seeds(sst2[k]["paired_sd"], PAPER_GAINS[k]) for k in (16, 64) if k in sst2}
    out["seeds_needed"] = need
    out["seeds"] = int(min(MAX_SEEDS, max([MIN_SEEDS, *need.values()])))
    out["cuts"], out["hours"] = cost_cuts(args, out)
    return out


def sweep_hours(args, rule, seeds, cola=True, rd=True):
    """The confirmatory sweep's wall time on SHARDS single-threaded shards, from the pilot's seconds per
    fine-tuning run at the chosen budget, each arm at its ARM_COST."""
    p, total = args.preset["fewshot"], 0.0
    for task, t in rule["tasks"].items():
        if task == "cola" and not cola:
            continue
        where = "first" if task in ("sst2",) else "all"
        for shots, v in t["shots"].items():
            if task == "cola" and not v.get("runs"):
                continue
            for key in p["tasks"][task]["methods"]:
                arm = compare.ARM_NAMES[key]
                cost = ARM_COST[arm][where] if isinstance(ARM_COST[arm], dict) else ARM_COST[arm]
                total += 0 if (arm == "RD" and not rd) else seeds * v["seconds"] * cost
    return total / SHARDS / 3600


def cost_cuts(args, rule):
    """The preregistered order of cuts while the estimate is above HOURS: CoLA's rows, then RD, then seeds down
    to MIN_SEEDS. Returns the cuts made (possibly none) and the estimate after them."""
    cuts, cola, rd, seeds = [], True, True, rule["seeds"]
    hours = lambda: sweep_hours(args, rule, seeds, cola, rd)
    if not all(math.isfinite(v["seconds"]) for t in rule["tasks"].values() for v in t["shots"].values()):
        return cuts, math.nan
    if hours() > HOURS:
        cola = False
        cuts.append("CoLA")
    if hours() > HOURS:
        rd = False
        cuts.append("RD")
    while hours() > HOURS and seeds > MIN_SEEDS:
        seeds -= 1
    if seeds < rule["seeds"]:
        cuts.append(f"seeds {rule['seeds']} -> {seeds}")
        rule["seeds"] = seeds
    return cuts, hours()


def report_pilot(args, base, runs, results):
    """fewshot_pilot.txt/.json: the pilot's runs and what its rules chose (the confirmatory sweep reads the
    JSON)."""
    rule = pilot_rule(args, runs, results)
    lines = [f"FEW-SHOT PILOT (preregistration_fewshot.md), fine-tuning only, "
             f"{seed_range(seeds_of(args, 'fewshot_pilot'))}: {rule['runs_finished']} of {rule['runs_planned']} "
             "runs ended" + ("" if rule["complete"] else "; INTERIM: the rules below are not final"), ""]
    for task, t in rule["tasks"].items():
        name = data.get_task(task).name
        lines += [f"{name}: mean held-out score by lr at {max(args.preset['fewshot_pilot']['budgets'])} steps: " +
                  ", ".join(f"{lr:g}: {v:.1f}" for lr, v in t["held_out_by_lr"].items()) +
                  f" -> lr {t['lr']:g}; at {min(args.preset['fewshot_pilot']['budgets'])} steps "
                  f"{t['held_out_small_budget']:.1f} -> {t['steps']} steps", "",
                  f"| {name} K | dev {data.get_task(task).metrics[0]} mean ± sd (n) | lowest | constant | learns | "
                  "paired sd assumed | seconds per fine-tuning run |" + (" row runs |" if task == "cola" else ""),
                  "|---|---|---|---|---|---|---|" + ("---|" if task == "cola" else "")]
        for shots, v in t["shots"].items():
            lines.append(f"| {shots} | {compare.num(v['dev_mean'])} ± {compare.num(v['dev_sd'])} ({v['n']}) | "
                         f"{compare.num(v['dev_min'])} | {compare.num(t['baseline'])} | "
                         f"{ {True: 'yes', False: 'no', None: '–'}[v['learns']]} | {v['paired_sd']:.1f} | "
                         f"{v['seconds']:.0f} |" + (f" {'yes' if v.get('runs') else 'no'} |" if task == "cola" else ""))
        lines.append("")
    lines += [f"seeds needed for the paper's gains at 80% power, Holm's strictest level {POWER_LEVEL}: " +
              ", ".join(f"{k}-shot ({PAPER_GAINS[k]:+.1f}): {v}" for k, v in rule["seeds_needed"].items()) +
              f" -> {rule['seeds']} seeds per K (at least {MIN_SEEDS}, at most {MAX_SEEDS})",
              f"estimated confirmatory wall time on {SHARDS} single-threaded shards: {rule['hours']:.1f} h"
              + (f"; cut to fit {HOURS:g} h: {', '.join(rule['cuts'])}" if rule["cuts"] else "")
              + (f"; still above {HOURS:g} h at the fewest seeds, so it runs over (rule 6)" if rule["hours"] > HOURS else "")]
    write_json(f"{base}.json", {"preset": f"{args.scale}/fewshot_pilot", "pilot": True, **compare.rnd([rule])[0],
                                "table": lines})
    write_csv(f"{base}_runs.csv", [{**compare.run_row(r, res), "shots": r.info["shots"], "lr": r.info["lr"]}
                                   for r, res in zip(runs, results) if res is not None and not res.get("error")])
    atomic_write(f"{base}.txt", lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))
    print(f"fewshot_pilot: wrote {base}.txt, {base}.json and {base}_runs.csv\n\n" + "\n".join(lines))

# -----------------------------------------------------------------------------
# the confirmatory runs

def pilot_choices(args):
    """What the pilot in --out chose (fewshot_pilot.json), or exit saying why there is nothing."""
    f = Path(args.out) / "fewshot_pilot.json"
    if not f.is_file():
        sys.exit(f"error: fewshot: no {f}: run fewshot_pilot into this --out first")
    rule = json.loads(f.read_text())
    if not rule.get("complete"):
        sys.exit(f"error: fewshot: {f} is from an unfinished pilot ({rule['runs_finished']} of "
                 f"{rule['runs_planned']} runs): finish fewshot_pilot first")
    return rule


def plan_fewshot(args):
    """SST-2 seed by seed, K by K, arm by arm (a sweep stopped early has whole seeds, so H8's pairs are whole);
    then CoLA's rows that the pilot kept, the same way. Each run with the pilot's lr and budget for its task."""
    base = Path(args.out) / "fewshot"
    compare.preset_of_folder(args, "fewshot", base)
    rule, p = pilot_choices(args), args.preset["fewshot"]
    n = args.seeds or rule["seeds"]
    first = setting(args, "fewshot", "first_seed")
    runs = []
    for task in tasks(args, "fewshot"):
        t = rule["tasks"].get(task)
        if t is None or (task == "cola" and "CoLA" in rule["cuts"]):
            continue
        arms = [compare.ARM_NAMES[k] for k in p["tasks"][task]["methods"] if not args.methods or k in args.methods]
        arms = [a for a in arms if not (a == "RD" and "RD" in rule["cuts"])]
        shots = [k for k in p["tasks"][task]["shots"] if task != "cola" or t["shots"].get(str(k), {}).get("runs")]
        pq = table4_pq(args, task)
        for seed in range(first, first + n):
            for k in shots:
                for arm in arms:
                    key, flags = compare.ARMS[arm]
                    flags = {**flags, **(dict(p=pq[0], q=pq[1]) if "attribution" in flags else {}),
                             **few_flags(task, k, t["lr"], t["steps"], p["batch_size"])}
                    runs.append(Run(f"{task}/{key}_k{k}_seed{seed}",
                                            train_flags(args, "fewshot", task, seed=seed, **flags),
                                            {"task": task, "method": arm, "seed": seed, "shots": k}))
    return base, runs


def collect(runs, results):
    """(task, K) -> arm -> seed -> finished result, and (task, K) -> arm -> seeds whose run failed."""
    done, failed = {}, {}
    for r, res in zip(runs, results):
        where = (r.info["task"], r.info["shots"])
        done.setdefault(where, {}).setdefault(r.info["method"], {})
        failed.setdefault(where, {}).setdefault(r.info["method"], set())
        if res is not None and res.get("error"):
            failed[where][r.info["method"]].add(r.info["seed"])
        elif res is not None:
            done[where][r.info["method"]][r.info["seed"]] = res
    return done, failed


def gains(by_method, arm="GA"):
    """seed -> arm minus fine-tuning in points, over the seeds where both finished."""
    a, b = by_method.get(arm, {}), by_method.get("fine-tuning", {})
    return {s: 100 * (a[s]["dev_at_best"] - b[s]["dev_at_best"]) for s in sorted(set(a) & set(b))}


def regime(args, task, by_method):
    """The few-shot regime check, from the fine-tuning runs alone: learns (compare's definition: mean dev at least
    5 points above the constant answer, every seed above it). Overfitting is not asked: with dev scored once there
    is no dev curve, and few-shot fine-tuning fits its K examples by construction."""
    ft = [res["dev_at_best"] for res in by_method.get("fine-tuning", {}).values()]
    baseline = compare.dev_baseline(args, "fewshot", task)
    if not ft or baseline is None:
        return {"label": "unknown", "n": len(ft), "baseline": baseline, "mean": None, "min": None}
    mean = mean_std(ft)[0]
    learns = mean >= baseline + compare.LEARN_MARGIN and min(ft) > baseline
    return {"label": "informative" if learns else "not informative at this scale", "n": len(ft),
            "baseline": baseline, "mean": mean, "min": min(ft)}


def rows(args, done, failed, regimes):
    """H5-H8 decided (confirm.decide: Holm, the preregistration's words), then the secondary rows."""
    where = lambda k: ("sst2", k)
    lost = lambda *ks: len(set().union(*(failed.get(where(k), {}).get(arm, set()) for k in ks  # noqa: E731
                                         for arm in ("GA", "fine-tuning"))))  # seeds of a failed run of the two arms
    primary = []
    for name, k in HYPOTHESES:
        d = gains(done.get(where(k), {}))
        primary.append({"hypothesis": name, "expected": +1, "difference": f"GA minus fine-tuning, {k} shots",
                        "arm": "GA", "task": "sst2", "shots": k, "metric": "dev accuracy", **confirm.paired_test(list(d.values())),
                        "failed": lost(k),  # the seeds left out of this difference: a failed GA or fine-tuning run
                        "regime": regimes.get(where(k), {}).get("label", "not run")})
    name, lo, hi = SHRINK
    g_lo, g_hi = gains(done.get(where(lo), {})), gains(done.get(where(hi), {}))
    d = [g_lo[s] - g_hi[s] for s in sorted(set(g_lo) & set(g_hi))]
    labels = [regimes.get(where(k), {}).get("label", "not run") for k in (lo, hi)]
    shrink_regime = next((x for x in labels if x != "informative"), "informative")
    primary.append({"hypothesis": name, "expected": +1, "arm": "GA",
                    "difference": f"(GA minus fine-tuning) at {lo} minus at {hi} shots, same seed", "task": "sst2",
                    "shots": f"{lo}-{hi}", "metric": "dev accuracy", **confirm.paired_test(d), "failed": lost(lo, hi),
                    "regime": shrink_regime})
    confirm.decide(primary)
    for r in primary:  # what a null can rule out: the gain this n and the observed sd find with 80% power
        r["detectable"] = detectable(r["sd"], r["n"]) if r["n"] >= 2 and math.isfinite(r["sd"]) else math.nan
    secondary = []
    for (task, k), by_method in done.items():
        for arm in by_method:
            if arm == "fine-tuning" or (task == "sst2" and arm == "GA"):
                continue
            d = gains(by_method, arm)
            secondary.append({"difference": f"{arm} minus fine-tuning, {k} shots", "task": task, "shots": k,
                              "metric": f"dev {data.get_task(task).metrics[0]}", **confirm.paired_test(list(d.values())),
                              "regime": regimes[(task, k)]["label"]})
    return primary, secondary


def curves(done):
    """Mean held-out loss per optimizer step (at each epoch's end) per (task, K, arm): dev is scored once, so
    the held-out set's loss is the run's curve."""
    out = {}
    for (task, k), by_method in done.items():
        for arm, by_seed in by_method.items():
            points = {}
            for res in by_seed.values():
                per_epoch = len(res["history"][0]["step_losses"])
                for h in res["history"]:
                    points.setdefault(h["epoch"] * per_epoch, []).append(h["holdout_loss"])
            out[(task, k, arm)] = sorted((step, float(np.mean(v))) for step, v in points.items())
    return out


NOTE = confirm.note("H5-H8", "H5-H8: above 0", of="whose K is", rows="secondary rows")


def p_cell(r):
    return confirm.p_text(r["p"])


def report_fewshot(args, base, runs, results):
    """fewshot.txt/.csv/.json/.png from the runs ended so far: valid at any point, saying how many have ended."""
    done, failed = collect(runs, results)
    regimes = {where: regime(args, where[0], by_method) for where, by_method in done.items()}
    primary, secondary = rows(args, done, failed, regimes)
    ended = sum(res is not None for res in results)
    seeds = sorted({r.info["seed"] for r in runs})
    complete = ended == len(runs) and bool(runs)
    lines = [f"FEW-SHOT STUDY (preregistration_fewshot.md): {ended} of {len(runs)} runs ended; {seed_range(seeds)}"]
    if not complete:
        lines.append("INTERIM: not every run has ended; these decisions are not the study's yet")
    lines += ["", "Regime check (fine-tuning alone: mean dev at least 5 points above the constant answer, every seed "
              "above it)", "", "| task, K | constant | fine-tuning mean, lowest (n) | verdict |", "|---|---|---|---|"]
    for (task, k), g in regimes.items():
        lines.append(f"| {data.get_task(task).name} {k} | {compare.num(g['baseline'])} | {compare.num(g['mean'])}, "
                     f"{compare.num(g['min'])} ({g['n']}) | {g['label']} |")
    lines += ["", "Primary: H5-H8, paired two-sided t-tests, Holm over the four at family-wise 0.05; sd: the paired "
              f"differences' sd; detectable: the true gain found with 80% power at this n and sd, at Holm's strictest "
              f"level {POWER_LEVEL}", "",
              "| | difference | n | estimate [95% CI], points | p | Holm level / adjusted p | wins/ties/losses | "
              "sd, detectable | paper (Table 5) | decision |", "|---|---|---|---|---|---|---|---|---|---|"]
    paper = lambda k: f"{PAPER_GAINS[k]:+.1f}" if k in PAPER_GAINS else \
        f"{PAPER_GAINS[SHRINK[1]] - PAPER_GAINS[SHRINK[2]]:+.1f}"
    ci = lambda r: f"{compare.num(r['mean'], 1, '+')} [{compare.num(r['ci_low'], 1, '+')}, {compare.num(r['ci_high'], 1, '+')}]"
    for r in primary:
        holm = "–" if r["rejected"] is None else f"{r['holm_level']:.4f} / {confirm.p_text(r['holm_p'])}"
        lines.append(f"| {r['hypothesis']} | {r['difference']} | {r['n']} | {ci(r)} | {p_cell(r)} | {holm} | "
                     f"{r['wins']}/{r['ties']}/{r['losses']} | {compare.num(r['sd'], 1)}, {compare.num(r['detectable'], 1)} | "
                     f"{paper(r['shots'])} | {r['decision']} |")
    lines += ["", "Secondary (descriptive, p unadjusted, not part of the test)", "",
              "| difference | task, metric | n | estimate [95% CI], points | p | wins/ties/losses | regime |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['difference']} | {data.get_task(r['task']).name} {r['metric']} | {r['n']} | {ci(r)} | "
              f"{p_cell(r)} | {r['wins']}/{r['ties']}/{r['losses']} | {r['regime']} |" for r in secondary]
    lines += ["", "Scores per arm (dev, held-out-best epoch)", "", "| task, K | arm | mean ± sd (n) |", "|---|---|---|"]
    for (task, k), by_method in done.items():
        for arm, by_seed in by_method.items():
            mean, sd = mean_std([res["dev_at_best"] for res in by_seed.values()])
            lines.append(f"| {data.get_task(task).name} {k} | {arm} | {compare.num(mean)} ± {compare.num(sd)} "
                         f"(n={len(by_seed)}) |")
    loss = curves(done)
    write_json(f"{base}.json", {"preset": f"{args.scale}/fewshot", "seed_range": seed_range(seeds),
                                "runs_ended": ended, "runs_planned": len(runs), "complete": complete,
                                "primary": compare.rnd(primary), "secondary": compare.rnd(secondary),
                                "regime": {f"{t} {k}": compare.rnd([g])[0] for (t, k), g in regimes.items()},
                                "holdout_loss": {f"{t} {k} {a}": v for (t, k, a), v in loss.items()},
                                "paper_gains": PAPER_GAINS, "table": lines, "note": NOTE})
    write_csv(f"{base}.csv", compare.rnd(primary + secondary))
    write_csv(f"{base}_runs.csv", [{**compare.run_row(r, res), "shots": r.info["shots"]}
                                   for r, res in zip(runs, results) if res is not None and not res.get("error")])
    atomic_write(f"{base}.txt", lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))
    if ended:
        figure(primary, loss, f"{base}.png", seed_range(seeds))
    print(f"fewshot: wrote {base}.txt, {base}.csv, {base}_runs.csv and {base}.json\n\n" + "\n".join(lines))


def figure(primary, loss, path, seeds):
    """Left: GA minus fine-tuning against K (log scale) with 95% intervals, beside the paper's Table 5 gains.
    Right: mean held-out loss against optimizer steps, fine-tuning solid, GA dashed, one color per K."""
    plt, fig, (a, b) = plt_figure(1, 2, figsize=(11, 4.2))
    hs = [r for r in primary if r["hypothesis"] != SHRINK[0] and r["n"]]
    ks = [r["shots"] for r in hs]
    a.errorbar(ks, [r["mean"] for r in hs], yerr=[[r["mean"] - r["ci_low"] for r in hs],
                                                   [r["ci_high"] - r["mean"] for r in hs]],
               fmt="o-", capsize=4, color="k", label="this study: MiniLM, mean and 95% CI")
    a.plot(list(PAPER_GAINS), list(PAPER_GAINS.values()), "s--", color="C3", label="the paper: RoBERTa-base, 5 seeds")
    a.axhline(0, color="gray", lw=1, ls=":")
    a.set_xscale("log", base=2)
    a.set_xticks(list(PAPER_GAINS), [str(k) for k in PAPER_GAINS])
    a.set(xlabel="K, training examples per class", ylabel="AD-DROP (GA) minus fine-tuning\n(SST-2 dev accuracy, points)",
          title=f"the gain against K ({seeds})")
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    for i, k in enumerate(PAPER_GAINS):
        for arm, style in (("fine-tuning", "-"), ("GA", "--")):
            pts = loss.get(("sst2", k, arm))
            if pts:
                b.plot([s for s, _ in pts], [v for _, v in pts], style, color=f"C{i}", label=f"{k} shots, {arm}")
    b.set(xlabel="optimizer step", ylabel="mean held-out loss", title="held-out loss (dev is scored once)")
    b.legend(fontsize=7, ncol=2)
    b.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)

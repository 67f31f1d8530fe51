"""
The preregistered confirmatory study (preregistration.md, fixed before any of its runs): the NER pilot that picks
N, the subset size of the NER runs, by the rule written there; then the confirmatory runs on fresh seeds and
their report: H1-H4, each a paired two-sided t-test over seeds, Holm's correction over the four, and the
decision words of the preregistration; the secondary measures below it, never part of the test. The runs are
compare's arms (compare.ARMS), planned and read back by compare's and sweep's machinery.
"""

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

import compare
import data
from sweep import atomic_write, mean_std, seed_range, seeds_of, setting, tasks, write_csv, write_json

ALPHA = 0.05  # family-wise error rate of H1-H4 (Holm)
# name, task, arm, minus arm, expected sign of the difference (0: none expected, either is reported)
HYPOTHESES = [("H1", "sst2", "GA-train", "GA", +1), ("H2", "sst2", "GA-train", "fine-tuning", +1),
              ("H3", "sst2", "GA", "fine-tuning", 0), ("H4", "conll2003", "GA", "fine-tuning", 0)]
SECONDARY = [("sst2", "RD", "fine-tuning")]  # on the primary metric, beside the family, unadjusted
POOLED_SECTION = "pooled, not part of the test"
POOLED = [("GA-train", "GA"), ("GA-train", "fine-tuning"), ("GA", "fine-tuning"), ("RD", "fine-tuning")]
# the exploratory compare's runs (same SST-2 settings, seeds 0-7): pooled with the new seeds, descriptive only
EXPLORATORY = Path(__file__).resolve().parent / "results" / "compare_cpu" / "compare_runs.csv"
# the pilot's cost rule: the 32 confirmatory NER runs (16 seeds x 2 arms) on 2 single-threaded shards within
# 3.5 hours; a GA epoch costs 1.45 plain ones (AD-DROP in all layers every other epoch, bench.py's MiniLM steps)
NER_RUNS, SHARDS, BUDGET_HOURS, GA_EPOCH_COST = 32, 2, 3.5, 1.45


def primary(task):
    """A run's preregistered primary score: SST-2, dev accuracy at the held-out-best epoch; NER, the full test
    set's entity F1 with that epoch's weights (--predict)."""
    return compare.predicted("test") if data.get_task(task).token_level else compare.dev_score


def metric_name(task):
    return "test entity F1" if data.get_task(task).token_level else f"dev {data.get_task(task).metrics[0]}"

# -----------------------------------------------------------------------------
# statistics: the paired test, Holm, the decision words

def t_test_p(d):
    """The two-sided p-value of the paired t-test of the differences d (one per seed) against a mean of 0:
    2 P(T > |t|), t = mean / (sd / sqrt(n)), n - 1 degrees of freedom (compare.t_cdf). nan below 2 differences;
    where they do not vary at all (sd 0), 1 for a mean of 0 and 0 for any other."""
    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return math.nan
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    return min(1.0, 2 * (1 - compare.t_cdf(abs(mean) / (sd / math.sqrt(len(d))), len(d) - 1)))


def paired_test(d):
    """Paired differences d (points, one per seed): n, mean, sd, 95% t interval, wins/ties/losses
    (compare.paired_summary) and the two-sided p of the paired t-test."""
    s = compare.paired_summary(d) if len(d) else {"n": 0, "mean": math.nan, "sd": math.nan, "ci_low": math.nan,
                                                  "ci_high": math.nan, "wins": 0, "ties": 0, "losses": 0}
    return {k: v for k, v in s.items() if k != "seeds_needed"} | {"p": t_test_p(d)}


def holm(p, alpha=ALPHA):
    """Holm's step-down over the p-values p; a nan is no member of the family (a hypothesis without data). Of
    the m members, the k-th smallest is rejected while p_(k) < alpha / (m - k + 1), stopping at the first that
    is not. Per p: rejected (None outside the family), its level alpha / (m - k + 1), and the Holm-adjusted
    p-value max over j <= k of min(1, (m - j + 1) p_(j)), which is below alpha exactly when rejected."""
    family = sorted((v, i) for i, v in enumerate(p) if math.isfinite(v))
    out = [{"rejected": None, "level": math.nan, "adjusted": math.nan} for _ in p]
    going, adjusted = True, 0.0
    for k, (v, i) in enumerate(family, 1):
        level = alpha / (len(family) - k + 1)
        going = going and v < level
        adjusted = max(adjusted, min(1.0, (len(family) - k + 1) * v))
        out[i] = {"rejected": going, "level": level, "adjusted": adjusted}
    return out


def decide(rows):
    """Holm over the rows with a p-value, then each row's decision as the preregistration words it:
    supported (rejected, the expected sign; H3 and H4, with no expected sign, say which arm is above),
    reversed (rejected, the other sign), not decided (not rejected); a task that fails the regime check is
    'not informative at this scale' whatever the test says (test_decision keeps that), and one whose check
    cannot be made yet (no fine-tuning run, or no dev set) says so beside the test's decision."""
    for row, h in zip(rows, holm([r["p"] for r in rows])):
        row.update(holm_level=h["level"], holm_p=h["adjusted"], rejected=h["rejected"])
        if h["rejected"] is None:
            row["test_decision"] = "no data yet"
        elif not h["rejected"]:
            row["test_decision"] = "not decided"
        elif row["expected"] == 0:
            row["test_decision"] = f"supported ({row['arm']} {'above' if row['mean'] > 0 else 'below'})"
        else:
            row["test_decision"] = "supported" if row["mean"] * row["expected"] > 0 else "reversed"
        if row["regime"] == "not informative at this scale":
            row["decision"] = row["regime"]
        elif row["regime"] == "unknown" and h["rejected"] is not None:  # data, but no regime check yet
            row["decision"] = f"regime unknown; by the test alone: {row['test_decision']}"
        else:
            row["decision"] = row["test_decision"]
    return rows

# -----------------------------------------------------------------------------
# the NER pilot: fine-tuning at three sizes, two seeds, and the rule that picks N

def plan_pilot(args):
    """Fine-tuning on CoNLL-2003 at each size (--limit: that one size instead), seed by seed."""
    base = Path(args.out) / "ner_pilot"
    compare.preset_of_folder(args, "ner_pilot", base)
    runs = []
    for n in [args.limit] if args.limit else args.preset["ner_pilot"]["sizes"]:
        runs += [r._replace(info={**r.info, "size": n}) for r in
                 compare.task_runs(args, "ner_pilot", "conll2003", ["fine-tuning"], f"_n{n}", limit=n)]
    return base, runs


def pilot_row(r, res):
    """One pilot run's line: its scores, epochs and time, and whether it learns (dev F1 at the selected epoch,
    on the dev sample, at least compare.LEARN_MARGIN above a constant answer's 0) and overfits (compare.overfits)."""
    row = {"size": r.info["size"], "seed": r.info["seed"],
           "status": "not finished" if res is None else "failed" if res.get("error") else "finished"}
    if row["status"] != "finished":
        return {**row, "learns": False, "overfits": False}
    seconds = [h["seconds"] for h in res["history"]]
    return {**row, "dev_f1": compare.dev_score(res), "full_dev_f1": compare.predicted("dev")(res),
            "test_f1": compare.predicted("test")(res), "best_epoch": res["best_epoch"], "epochs": len(seconds),
            "learns": compare.dev_score(res) >= compare.constant_baseline("conll2003", []) + compare.LEARN_MARGIN,
            "overfits": compare.overfits(res["history"]), "epoch_seconds": float(np.mean(seconds)),
            "other_seconds": max(0.0, res.get("seconds", 0.0) - sum(seconds))}


def cost_hours(rows):
    """The 32 confirmatory NER runs at one size, in hours of wall time on SHARDS shards, from its finished pilot
    runs: per seed a fine-tuning run and a GA run of the pilot's mean epochs, at its mean seconds per epoch
    (GA's epochs GA_EPOCH_COST times that), each plus what a run costs besides its epochs (loading, --predict)."""
    epochs, per_epoch, other = (np.mean([r[k] for r in rows]) for k in ("epochs", "epoch_seconds", "other_seconds"))
    return float(NER_RUNS / 2 * (epochs * per_epoch * (1 + GA_EPOCH_COST) + 2 * other) / SHARDS / 3600)


def pilot_rule(rows, sizes, n_seeds, budget=BUDGET_HOURS):
    """preregistration.md's rule: a size passes when every seed's run learns and overfits; N is the largest
    passing size; none passing, the smallest size (500). Cost rule: while N's estimated cost (cost_hours) is
    over budget, the next smaller passing size. No N until every pilot run has finished (or failed: a failed
    run neither learns nor overfits)."""
    per = {}
    for n in sizes:
        ended = [r for r in rows if r["size"] == n and r["status"] != "not finished"]
        ok = [r for r in ended if r["status"] == "finished"]
        per[n] = {"runs": len(ended), "passes": all(r["learns"] and r["overfits"] for r in ended)
                  if len(ended) == n_seeds else None, "hours": cost_hours(ok) if ok else math.nan}
    if any(v["passes"] is None for v in per.values()):
        left = sum(n_seeds - v["runs"] for v in per.values())
        return {"sizes": per, "n": None, "why": f"{left} pilot runs not finished: no N yet"}
    passing = sorted((n for n in sizes if per[n]["passes"]), reverse=True)
    if not passing:
        return {"sizes": per, "n": min(sizes), "why": f"no size passes: N = {min(sizes)}, the smallest; the "
                "confirmatory fine-tuning runs' regime check decides whether H4 is informative"}
    n, why = passing[0], f"the largest passing size is {passing[0]}"
    for smaller in passing[1:]:
        if not per[n]["hours"] > budget:
            break
        why += f"; at {n} the 32 NER runs take about {per[n]['hours']:.1f} h on {SHARDS} shards, over " \
               f"{budget:g} h: the next smaller passing size, {smaller}"
        n = smaller
    if per[n]["hours"] > budget:
        why += f" (about {per[n]['hours']:.1f} h, over {budget:g} h, and no smaller size passes)"
    return {"sizes": per, "n": n, "why": why}


def report_pilot(args, base, runs, results):
    """The pilot's table per size and seed, the rule applied, N: printed and in ner_pilot.txt/.csv/.json
    (confirm reads N from ner_pilot.json)."""
    rows = [pilot_row(r, res) for r, res in zip(runs, results)]
    seeds, sizes = list(seeds_of(args, "ner_pilot")), list(dict.fromkeys(r.info["size"] for r in runs))
    rule = pilot_rule(rows, sizes, len(seeds))
    used, done = seed_range(seeds), sum(r["status"] != "not finished" for r in rows)
    lines = [f"NER PILOT (preregistration.md), not a result: it picks N, the CoNLL-2003 training subset of the "
             f"confirmatory NER runs; its {used} count for nothing else. Fine-tuning only; {done} of {len(rows)} "
             "runs finished.", "",
             f"| size | seed | dev F1, sample of {setting(args, 'ner_pilot', 'dev_limit')} (selected epoch) | full dev "
             "F1 | test F1 | best epoch | epochs "
             "run | learns | overfits | s per epoch |", "|---|---|---|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for r in rows:
        cells = ([compare.num(r[k]) for k in ("dev_f1", "full_dev_f1", "test_f1")] + [r["best_epoch"], r["epochs"],
                 yes[r["learns"]], yes[r["overfits"]], f"{r['epoch_seconds']:.1f}"] if r["status"] == "finished"
                 else [r["status"]] + ["–"] * 7)
        lines.append(f"| {r['size']} | {r['seed']} | " + " | ".join(map(str, cells)) + " |")
    lines += ["", f"a size passes when both seeds learn (dev F1 at least {100 * compare.LEARN_MARGIN:g} points "
              "above 0, a constant answer's) and overfit (dev loss ends 5% above its lowest, train loss below its "
              f"value there); cost: the {NER_RUNS} confirmatory NER runs on {SHARDS} single-threaded shards "
              f"(GA epochs at {GA_EPOCH_COST}x), at most {BUDGET_HOURS:g} h", "",
              "| size | runs ended | passes | estimated cost |", "|---|---|---|---|"]
    for n, v in rule["sizes"].items():
        hours = "–" if math.isnan(v["hours"]) else f"{v['hours']:.1f} h"
        lines.append(f"| {n} | {v['runs']} of {len(seeds)} | {'–' if v['passes'] is None else yes[v['passes']]} "
                     f"| {hours} |")
    lines += ["", f"N = {rule['n']}: {rule['why']}" if rule["n"] else f"N: {rule['why']}"]
    write_csv(f"{base}.csv", [{**r, "seed_range": used} for r in compare.rnd(rows)])
    write_json(f"{base}.json", {"preset": f"{args.scale}/ner_pilot", "pilot": True, "seed_range": used,
                                "sizes": sizes, "n": rule["n"], "why": rule["why"],
                                "per_size": {str(n): v for n, v in rule["sizes"].items()},
                                "runs_finished": done, "runs_planned": len(rows), "rows": compare.rnd(rows),
                                "table": lines})
    atomic_write(f"{base}.txt", lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))
    print(f"ner_pilot: wrote {base}.txt, {base}.csv and {base}.json\n\n" + "\n".join(lines))

# -----------------------------------------------------------------------------
# the confirmatory runs

def ner_limit(args):
    """N for the NER runs, and why there is none: --ner-limit, else what the pilot in --out picked."""
    if args.ner_limit:
        return args.ner_limit, None
    f = Path(args.out) / "ner_pilot.json"
    if not f.is_file():
        return None, f"no --ner-limit and no {f}: run ner_pilot into this --out first, or pass --ner-limit N"
    pilot = json.loads(f.read_text())
    if pilot.get("n") is None:
        return None, f"no --ner-limit, and {f} has no N yet ({pilot.get('why')}): finish ner_pilot (then " \
                     "`ner_pilot --tables-only` rewrites it from every finished run), or pass --ner-limit N"
    return int(pilot["n"]), None


def arms(args, task):
    """A task's arms in the preregistered order (the task's own list in the preset, else the study's), less those
    that --methods leaves out."""
    preset = args.preset["confirm"]
    return [compare.ARM_NAMES[k] for k in preset["tasks"][task].get("methods", preset["methods"])
            if not args.methods or k in args.methods]


def plan_confirm(args):
    """SST-2 seed by seed (arms ft, ga, gatrain, rd), then NER at N seed by seed (ft, ga): a sweep stopped early
    has whole seeds. Without an N (ner_limit) the NER runs are left out, and one line says why."""
    base = Path(args.out) / "confirm"
    compare.preset_of_folder(args, "confirm", base)
    runs = []
    for task in tasks(args, "confirm"):
        extra, tag = {}, ""
        if data.get_task(task).token_level:
            n, why = ner_limit(args)
            if n is None:
                print(f"confirm: no NER runs: {why}", file=sys.stderr, flush=True)
                continue
            extra, tag = {"limit": n}, f"_n{n}"
        runs += compare.task_runs(args, "confirm", task, arms(args, task), tag, **extra)
    return base, runs


def collect(runs, results):
    """task -> arm -> seed -> finished result, and task -> arm -> the seeds whose run failed (diverged)."""
    done, failed = {}, {}
    for r, res in zip(runs, results):
        task, arm, seed = r.info["task"], r.info["method"], r.info["seed"]
        done.setdefault(task, {}).setdefault(arm, {})
        failed.setdefault(task, {}).setdefault(arm, set())
        if res is not None and res.get("error"):
            failed[task][arm].add(seed)
        elif res is not None:
            done[task][arm][seed] = res
    return done, failed


def difference(section, task, arm, other, seeds, by_method, failed, score=None, metric=None):
    """A table row: arm minus other in points, paired by seed over the seeds where both finished with a score
    (paired_test), and the seeds left out because either run failed."""
    score = score or primary(task)
    a, b = ({s: v for s, res in by_method.get(m, {}).items() if (v := score(res)) is not None} for m in (arm, other))
    d = [100 * (a[s] - b[s]) for s in sorted(set(a) & set(b))]
    return {"section": section, "difference": f"{arm} minus {other}", "arm": arm, "task": task,
            "metric": metric or metric_name(task), "seed_range": seeds, **paired_test(d),
            "failed": len(failed.get(arm, set()) | failed.get(other, set()))}


def exploratory(path=EXPLORATORY, exclude=()):
    """The exploratory compare's SST-2 runs, arm -> seed -> the scores of a result, but for the seeds in
    exclude; {} where the file is missing."""
    if not Path(path).is_file():
        return {}
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["task"] == "sst2" and int(row["seed"]) not in exclude:
                out.setdefault(row["method"], {})[int(row["seed"])] = {"dev_at_best": float(row["dev_at_best"]),
                                                                       "best_metric": float(row["selection_metric"])}
    return out


def study_rows(done, failed, regimes, seeds, path=EXPLORATORY):
    """The primary rows (H1-H4, decided) and the secondary ones: RD minus fine-tuning, NER's full dev F1, and the
    SST-2 differences over the exploratory and the confirmatory seeds pooled. seeds: task -> its seed range."""
    ranges = {task: seed_range(s) for task, s in seeds.items()}
    primary_rows = decide([{"hypothesis": name, "expected": sign, **difference(
        "primary", task, arm, other, ranges.get(task, "not run"), done.get(task, {}), failed.get(task, {})),
        "regime": regimes[task]["label"] if task in regimes else "not run"}
        for name, task, arm, other, sign in HYPOTHESES])
    secondary = [difference("secondary", task, arm, other, ranges[task], done[task], failed.get(task, {}))
                 for task, arm, other in SECONDARY if task in done]
    if "conll2003" in done:
        secondary.append(difference("secondary", "conll2003", "GA", "fine-tuning", ranges["conll2003"],
                                    done["conll2003"], failed.get("conll2003", {}), compare.predicted("dev"),
                                    "full dev entity F1"))
    old = exploratory(path, exclude=set(seeds.get("sst2", ())))
    if old and "sst2" in done:
        by = {m: {**old.get(m, {}), **done["sst2"].get(m, {})} for m in {*old, *done["sst2"]}}
        label = f"{seed_range({s for v in old.values() for s in v})} (exploratory) + {ranges['sst2']}, pooled"
        secondary += [difference(POOLED_SECTION, "sst2", arm, other, label, by, failed.get("sst2", {}))
                      for arm, other in POOLED]
    return primary_rows, secondary

# -----------------------------------------------------------------------------
# the report

def note(family, signs, regime="", of="of a task", rows="secondary and pooled rows"):
    """The report's note on how to read it, for the hypotheses `family` with their expected `signs`."""
    return ("a difference is one arm minus the other on the same seed, in points; CI: mean +- t_{0.975,n-1} "
            f"sd/sqrt(n); p: two-sided paired t-test; Holm over {family} at family-wise 0.05: the k-th smallest of "
            "m p-values rejected while below 0.05/(m-k+1), stopping at the first that is not (a hypothesis "
            f"{of} not informative at this scale keeps its place in the family); supported: rejected with the "
            f"expected sign ({signs}), reversed: rejected with the other, not decided: not rejected; a seed whose "
            "run failed in either arm is left out of that difference; regime check from the fine-tuning runs alone, "
            f"on dev at the held-out-best epoch{regime}; {rows} are descriptive, their p unadjusted and outside the test")


NOTE = note("H1-H4 (those with data)", "H1, H2: above; H3, H4: either, said which",
            regime=" (NER: the 1000-sentence dev sample, a constant answer's entity F1 taken as 0)")


def p_text(p):
    return "–" if not math.isfinite(p) else f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def cells(r):
    """The cells every difference row shows: what, where, seeds, n, estimate [CI], p, wins/ties/losses."""
    ci = f"{compare.num(r['mean'], 1, '+')} [{compare.num(r['ci_low'], 1, '+')}, {compare.num(r['ci_high'], 1, '+')}]"
    return [r["difference"], f"{data.get_task(r['task']).name} {r['metric']}", r["seed_range"],
            f"{r['n']}" + (f" ({r['failed']} failed, left out)" if r["failed"] else ""), ci, p_text(r["p"]),
            f"{r['wins']}/{r['ties']}/{r['losses']}"]


def confirm_table(primary_rows, secondary, regimes, done, epochs, ranges, header):
    """The report's Markdown lines: what has ended (header), the regime check, H1-H4, then the secondary
    measures: the other differences, the pooled ones, the scores per arm and the dev loss curves. ranges:
    task -> the seed range it was planned over."""
    over = "; ".join(f"{data.get_task(t).name} {s}" for t, s in ranges.items()) or "no runs"
    titled = lambda title, table: [f"{title} over {over}: {table[0]}"] + table[1:]
    lines = header + [""] + titled("Regime check", compare.regime_table(regimes)) + \
        ["", "Primary: H1-H4, one paired difference per seed, "
             "two-sided paired t-test, Holm over the hypotheses with data at family-wise 0.05", "",
             "| | difference | task, metric | seeds | n | estimate [95% CI], points | p | Holm level / adjusted p "
             "| wins/ties/losses | decision |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in primary_rows:
        holm_cell = "–" if r["rejected"] is None else f"{r['holm_level']:.4f} / {p_text(r['holm_p'])}"
        c = cells(r)
        lines.append(f"| {r['hypothesis']} | " + " | ".join(c[:6] + [holm_cell, c[6], r["decision"]]) + " |")
    head = ["| difference | task, metric | seeds | n | estimate [95% CI], points | p | wins/ties/losses |",
            "|---|---|---|---|---|---|---|"]
    pooled = [r for r in secondary if r["section"] == POOLED_SECTION]
    lines += ["", "Secondary (descriptive, not part of the test; p unadjusted)", ""] + head + \
        ["| " + " | ".join(cells(r)) + " |" for r in secondary if r not in pooled]
    if pooled:
        lines += ["", "Pooled: the exploratory compare's seeds with the confirmatory ones (the same SST-2 settings); "
                  "descriptive, not part of the test", ""] + head + ["| " + " | ".join(cells(r)) + " |" for r in pooled]
    lines += ["", "Scores per arm", "", "| task, metric | seeds | arm | mean ± sd (n) |", "|---|---|---|---|"]
    for task, by_method in done.items():
        for arm, by_seed in by_method.items():
            mean, sd = mean_std(v := [x for res in by_seed.values() if (x := primary(task)(res)) is not None])
            lines.append(f"| {data.get_task(task).name} {metric_name(task)} | {ranges[task]} | {arm} | "
                         f"{compare.num(mean)} ± {compare.num(sd)} (n={len(v)}) |")
    return lines + [""] + titled("Dev loss curves", compare.loss_table(epochs))


def header(runs, results, ranges):
    """The report's first lines: how many runs have ended of how many, per task with its seeds (and NER's N);
    INTERIM until every run of H1-H4 has."""
    ended = [res is not None for res in results]
    n = next((r.argv[r.argv.index("--limit") + 1] for r in runs if r.info["task"] == "conll2003"), None)
    of = lambda t: [e for r, e in zip(runs, ended) if r.info["task"] == t]
    per_task = [f"{data.get_task(t).name} {s}" + (f" at N = {n}" if t == "conll2003" else "") +
                f": {sum(of(t))} of {len(of(t))}" for t, s in ranges.items()]
    if "conll2003" not in ranges:
        per_task.append("CoNLL-2003: no runs planned (no N: run ner_pilot, or pass --ner-limit)")
    lines = [f"CONFIRMATORY STUDY (preregistration.md): {sum(ended)} of {len(runs)} runs ended; " + "; ".join(per_task)]
    complete = all(ended) and {t for _, t, *_ in HYPOTHESES} <= set(ranges)
    if not complete:
        lines.append("INTERIM: not every run of H1-H4 has ended; these decisions are not the study's yet")
    return lines, {"runs_ended": sum(ended), "runs_planned": len(runs), "complete": complete,
                   "ner_limit": None if n is None else int(n)}


def report_confirm(args, base, runs, results):
    """confirm.txt/.csv/.json (and confirm_runs.csv, confirm_epochs.csv, confirm.png) from the runs ended so far:
    valid at any point, saying how many have ended and, per hypothesis, the n it used."""
    done, failed = collect(runs, results)
    seeds = {task: list(seeds_of(args, "confirm", task)) for task in done}
    ranges = {task: seed_range(s) for task, s in seeds.items()}
    regimes = {task: compare.regime_check(by_method.get("fine-tuning", {}), compare.dev_baseline(args, "confirm", task),
                                          compare.dev_score) for task, by_method in done.items()}
    primary_rows, secondary = study_rows(done, failed, regimes, seeds)
    epochs = [row for task, by_method in done.items() for row in compare.epoch_rows(task, by_method)]
    head, counts = header(runs, results, ranges)
    lines = confirm_table(primary_rows, secondary, regimes, done, epochs, ranges, head)
    run_rows = [{**compare.run_row(r, res), "seed_range": ranges[r.info["task"]]}
                for r, res in zip(runs, results) if res is not None and not res.get("error")]
    for name, rows in ((".csv", compare.rnd(primary_rows + secondary)), ("_runs.csv", run_rows),
                       ("_epochs.csv", [{**e, "seed_range": ranges[e["task"]]} for e in compare.rnd(epochs)])):
        write_csv(f"{base}{name}", rows)  # nothing without rows
    write_json(f"{base}.json", {
        "preset": f"{args.scale}/confirm", "seed_ranges": ranges, **counts,
        "regime": {t: {**compare.rnd([g])[0], "scores": compare.rnd([g["scores"]])[0]} for t, g in regimes.items()},
        "primary": compare.rnd(primary_rows), "secondary": compare.rnd(secondary), "epochs": compare.rnd(epochs),
        "table": lines, "note": NOTE})
    atomic_write(f"{base}.txt", lambda tmp: Path(tmp).write_text("\n".join(lines + ["", NOTE]) + "\n"))
    if run_rows:  # the primary metric's paired differences from fine-tuning, and the dev loss curves
        views = lambda task: [(f"{data.get_task(task).name} {metric_name(task)}", metric_name(task).split(" ", 1)[1],
                               primary(task))]
        compare.compare_figure(compare.figure_columns(done, epochs, regimes, views), f"{base}.png",
                               "; ".join(f"{data.get_task(t).name} {s}" for t, s in ranges.items()))
    written = [".txt", ".csv", ".json"] + ["_runs.csv", "_epochs.csv", ".png"] * bool(run_rows)
    print(f"confirm: wrote {', '.join(f'{base}{w}' for w in written)}\n\n" + "\n".join(lines))

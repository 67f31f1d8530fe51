"""
Tests of the confirmatory study (confirm.py) on hand-made numbers and plans, no training: Student's t CDF and
the paired t-test's p, Holm's step-down, the decision words of H1-H4, the NER pilot's rule, and the run lists
of ner_pilot and confirm with their flags and refusals.
"""

import csv
import json
import math

import numpy as np
import pytest

import compare
import confirm
import experiments
from support import settings
import sweep


# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None

# -----------------------------------------------------------------------------
# statistics

@pytest.mark.parametrize("t, df, p", [(2.0, 10, 0.0734), (2.5, 23, 0.0199), (1.959964, 100_000, 0.0500),
                                      (2.228, 10, 0.0500), (12.706, 1, 0.0500)])
def test_t_cdf_gives_the_printed_two_sided_p_values(t, df, p):
    """2 (1 - F(|t|)) is the two-sided p-value: the tables' values to 4 decimals (t = 2.0 with 10 df, 0.0734;
    2.5 with 23 df, 0.0199; the 0.975 quantiles give 0.05), and for large df the normal's 1.96."""
    assert 2 * (1 - compare.t_cdf(t, df)) == pytest.approx(p, abs=1e-4)


def test_t_cdf_matches_the_closed_forms_of_one_and_two_df():
    """With 1 df, t is Cauchy: F(t) = 1/2 + atan(t)/pi; with 2 df, F(t) = 1/2 + t / (2 sqrt(2 + t^2)). Simpson's
    rule in the angle must match both to 1e-9 from the centre to far in the tails (t = 1e6, which a grid over
    t itself would miss), with F(-t) = 1 - F(t)."""
    for t in (0.0, 0.3, 1.0, 4.0, 50.0, 1e6, -2.5):
        assert compare.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-9)
        assert compare.t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-9)
        assert compare.t_cdf(-t, 7) == pytest.approx(1 - compare.t_cdf(t, 7), abs=1e-12)


def test_paired_t_test_p_on_hand_made_differences():
    """Differences 1..5: t = 3 / (sqrt(2.5) / sqrt(5)) = 4.243 with 4 df; with 4 df the closed form
    F(t) = 1/2 + (3/4) s (1 - s^2/3), s = t / sqrt(4 + t^2), gives p = 0.0132. One difference: no p (nan);
    differences that do not vary: p 0 (mean not 0) or 1 (mean 0)."""
    t = 3 / (math.sqrt(2.5) / math.sqrt(5))
    s = t / math.sqrt(4 + t * t)
    assert confirm.t_test_p([1, 2, 3, 4, 5]) == pytest.approx(2 * (0.5 - 0.75 * s * (1 - s * s / 3)), abs=1e-9)
    assert confirm.t_test_p([1, 2, 3, 4, 5]) == pytest.approx(0.0132, abs=1e-4)
    assert confirm.t_test_p([-1, -2, -3, -4, -5]) == confirm.t_test_p([1, 2, 3, 4, 5])
    assert math.isnan(confirm.t_test_p([1.0])) and confirm.t_test_p([0.5] * 4) == 0 and confirm.t_test_p([0] * 4) == 1


def test_holm_on_hand_made_p_values():
    """p = [0.01, 0.04, 0.03, 0.005], m = 4, worked by hand: 0.005 < 0.05/4 rejected; 0.01 < 0.05/3 rejected;
    0.03 is not below 0.05/2: not rejected, and the step-down stops, so 0.04 is not rejected either. Adjusted
    p-values: running maxima of (m - k + 1) p_(k): 0.02, 0.03, 0.06, 0.06."""
    h = confirm.holm([0.01, 0.04, 0.03, 0.005])
    assert [x["rejected"] for x in h] == [True, False, False, True]
    assert [x["level"] for x in h] == pytest.approx([0.05 / 3, 0.05, 0.05 / 2, 0.05 / 4])
    assert [x["adjusted"] for x in h] == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_stops_at_the_first_non_rejection_and_skips_missing_hypotheses():
    """[0.013, 0.014, 0.015, 0.016]: the smallest is not below 0.0125, so nothing is rejected, though 0.016 is
    below the last level 0.05; every adjusted p is then at least 0.05. A nan (no data) is outside the family:
    three p-values 0.005, 0.01, 0.03 are tested at 0.05/3, 0.05/2, 0.05 and all rejected."""
    h = confirm.holm([0.013, 0.014, 0.015, 0.016])
    assert not any(x["rejected"] for x in h) and min(x["adjusted"] for x in h) >= 0.05
    h = confirm.holm([0.01, math.nan, 0.03, 0.005])
    assert [x["rejected"] for x in h] == [True, None, True, True]
    assert h[0]["level"] == pytest.approx(0.025) and math.isnan(h[1]["adjusted"])

# -----------------------------------------------------------------------------
# the hypothesis table

def overfitting(dev_f1=0.5):
    return {"best_metric": dev_f1, "dev_at_best": dev_f1, "best_epoch": 2, "finished": True,
            "history": [{"epoch": e, "dev_loss": d, "train_loss": t, "metric": dev_f1, "seconds": 60.0}
                        for e, (d, t) in enumerate(zip([0.6, 0.5, 0.7], [0.6, 0.4, 0.2]), 1)]}


def hand_made(rng):
    """Six seeds. SST-2: GA-train 2 points below fine-tuning, GA 4 below (each with a little noise); NER: GA's
    test F1 noise around fine-tuning's. Expected: H1 (GA-train - GA, +2) supported, H2 (GA-train - ft, -2)
    reversed, H3 (GA - ft, -4) supported (GA below), H4 not decided."""
    done = {"sst2": {}, "conll2003": {}}
    for s in range(100, 106):
        ft = 0.80 + 0.01 * rng.standard_normal()
        for arm, shift in (("fine-tuning", 0), ("GA", -0.04), ("GA-train", -0.02), ("RD", 0)):
            done["sst2"].setdefault(arm, {})[s] = overfitting(ft + shift + 0.002 * rng.standard_normal())
        for arm in ("fine-tuning", "GA"):
            res = overfitting(0.6)
            res["predictions"] = {"dev": {"f1": 0.6}, "test": {"f1": 0.55 + 0.01 * rng.standard_normal()}}
            done["conll2003"].setdefault(arm, {})[s] = res
    return done


def test_hypothesis_rows_give_each_decision_word(tmp_path):
    """On hand_made results, with both tasks informative (every seed learns and overfits): the four decisions
    as the preregistration words them, each row's n 6 and its estimate the mean difference in points. A seed
    whose GA run failed is left out of H1 and H3 (n 5, counted as failed) and kept in H2. The pooled rows add
    the exploratory seeds of a CSV (here 2) to the confirmatory ones and say so."""
    done = hand_made(np.random.default_rng(0))
    failed = {t: {arm: set() for arm in by} for t, by in done.items()}
    regimes = {t: compare.regime_check(by["fine-tuning"], 0.0 if t == "conll2003" else 0.5, compare.dev_score)
               for t, by in done.items()}
    assert {g["label"] for g in regimes.values()} == {"informative"}
    seeds = {t: list(range(100, 106)) for t in done}
    rows, _ = confirm.study_rows(done, failed, regimes, seeds, path=tmp_path / "none.csv")
    assert [r["decision"] for r in rows] == ["supported", "reversed", "supported (GA below)", "not decided"]
    sst = done["sst2"]
    d = [100 * (sst["GA-train"][s]["dev_at_best"] - sst["GA"][s]["dev_at_best"]) for s in range(100, 106)]
    assert rows[0]["mean"] == pytest.approx(np.mean(d)) and rows[0]["p"] == pytest.approx(confirm.t_test_p(d))
    assert [r["n"] for r in rows] == [6] * 4 and rows[0]["seed_range"] == "seeds 100-105"

    del done["sst2"]["GA"][103]
    failed["sst2"]["GA"].add(103)
    exploratory = tmp_path / "runs.csv"
    with open(exploratory, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "method", "seed", "dev_at_best", "selection_metric"])
        w.writerows([["sst2", arm, s, 0.8, 0.8] for s in (0, 1) for arm in ("fine-tuning", "GA", "GA-train", "RD")])
    rows, secondary = confirm.study_rows(done, failed, regimes, seeds, path=exploratory)
    assert [(r["n"], r["failed"]) for r in rows] == [(5, 1), (6, 0), (5, 1), (6, 0)]
    pooled = [r for r in secondary if r["section"] == confirm.POOLED_SECTION]
    assert [r["n"] for r in pooled] == [7, 8, 7, 8]
    assert pooled[0]["seed_range"] == "seeds 0-1 (exploratory) + seeds 100-105, pooled"


def test_a_task_that_fails_the_regime_check_is_not_informative():
    """NER's fine-tuning runs below 5 points of F1 (a constant answer scores 0): H4's decision is 'not
    informative at this scale' whatever its test says (kept as test_decision); H4 stays in Holm's family."""
    done = hand_made(np.random.default_rng(1))
    for res in done["conll2003"]["fine-tuning"].values():
        res["dev_at_best"] = 0.02
    regimes = {t: compare.regime_check(by["fine-tuning"], compare.constant_baseline(t, [0, 1, 1]), compare.dev_score)
               for t, by in done.items()}
    assert regimes["conll2003"]["label"] == "not informative at this scale"
    rows, _ = confirm.study_rows(done, {}, regimes, {t: range(100, 106) for t in done}, path="/nonexistent")
    assert rows[3]["decision"] == "not informative at this scale" and rows[3]["test_decision"] == "not decided"
    assert rows[3]["rejected"] is not None and rows[0]["decision"] == "supported"


def test_a_task_whose_regime_cannot_be_checked_gets_no_decision_of_its_own():
    """SST-2's dev set not found (tables built without GLUE_DIR): its regime is unknown, not 'not
    informative', and H1-H3 say so beside what the test alone gives; H4, its task checked, keeps its decision."""
    done = hand_made(np.random.default_rng(0))
    regimes = {"sst2": compare.regime_check(done["sst2"]["fine-tuning"], None, compare.dev_score),
               "conll2003": compare.regime_check(done["conll2003"]["fine-tuning"], 0.0, compare.dev_score)}
    rows, _ = confirm.study_rows(done, {}, regimes, {t: range(100, 106) for t in done}, path="/nonexistent")
    assert [r["decision"] for r in rows] == [f"regime unknown; by the test alone: {r['test_decision']}"
                                             for r in rows[:3]] + ["not decided"]
    assert rows[0]["test_decision"] == "supported"

# -----------------------------------------------------------------------------
# the NER pilot's rule

def pilot_rows(spec, epoch_seconds=60.0, epochs=6, other=100.0):
    """Pilot rows from spec: size -> [(dev F1, overfits) per seed] (None: not finished, 'failed': diverged)."""
    rows = []
    for size, runs in spec.items():
        for seed, run in zip((900, 901), runs):
            r = sweep.Run(f"conll2003/ft_n{size}_seed{seed}", [], {"size": size, "seed": seed})
            if run is None or run == "failed":
                rows.append(confirm.pilot_row(r, None if run is None else {"error": "diverged"}))
                continue
            dev, over = run
            loss = [0.6, 0.5] + [0.5 + (0.1 if over else -0.01) * e for e in range(1, epochs - 1)]
            res = {"dev_at_best": dev, "best_metric": dev, "best_epoch": 2, "seconds": epochs * epoch_seconds + other,
                   "history": [{"epoch": e, "dev_loss": d, "train_loss": 1 / e, "metric": dev, "seconds": epoch_seconds}
                               for e, d in enumerate(loss, 1)],
                   "predictions": {"dev": {"f1": dev}, "test": {"f1": dev - 0.01}}}
            rows.append(confirm.pilot_row(r, res))
    return rows


SIZES = [500, 1000, 2000]


def test_pilot_rule_takes_the_largest_size_where_both_seeds_learn_and_overfit():
    """2000: one seed does not overfit, so it fails; 1000 and 500 pass: N = 1000. A size with a seed below 5
    points of F1, or a failed run, fails too. Nothing passing: N = 500, the smallest."""
    ok = [(0.40, True), (0.42, True)]
    rule = confirm.pilot_rule(pilot_rows({500: ok, 1000: ok, 2000: [(0.5, True), (0.5, False)]}), SIZES, 2)
    assert (rule["n"], [rule["sizes"][n]["passes"] for n in SIZES]) == (1000, [True, True, False])
    rows = pilot_rows({500: ok, 1000: [(0.04, True), (0.5, True)], 2000: [ok[0], "failed"]})
    rule = confirm.pilot_rule(rows, SIZES, 2)
    assert rule["n"] == 500 and [rule["sizes"][n]["passes"] for n in SIZES] == [True, False, False]
    rule = confirm.pilot_rule(pilot_rows({n: [(0.02, True), (0.5, True)] for n in SIZES}), SIZES, 2)
    assert rule["n"] == 500 and "no size passes" in rule["why"]


def test_pilot_rule_waits_for_every_run_and_applies_the_cost_rule():
    """A run not finished: no N yet. Cost: 6 epochs of 60 s plain, GA's at 1.45x, 100 s besides per run: per
    seed 6 x 60 x 2.45 + 2 x 100 = 1082 s, x 16 seeds / 2 shards = 2.40 h, within 3.5 h; at 100 s an epoch,
    3.71 h, over: the next smaller passing size (and again, down to the smallest that passes)."""
    ok = [(0.4, True), (0.4, True)]
    assert confirm.pilot_rule(pilot_rows({500: ok, 1000: ok, 2000: [ok[0], None]}), SIZES, 2)["n"] is None
    rows = pilot_rows({500: ok, 1000: ok}, epoch_seconds=60) + pilot_rows({2000: ok}, epoch_seconds=100)
    rule = confirm.pilot_rule(rows, SIZES, 2)
    assert rule["sizes"][1000]["hours"] == pytest.approx(16 * (6 * 60 * 2.45 + 200) / 2 / 3600)
    assert rule["sizes"][1000]["hours"] == pytest.approx(2.404, abs=1e-3)
    assert rule["sizes"][2000]["hours"] == pytest.approx(3.711, abs=1e-3)
    assert rule["n"] == 1000 and "next smaller passing size, 1000" in rule["why"]
    rule = confirm.pilot_rule(pilot_rows({500: ok}) + pilot_rows({1000: ok, 2000: ok}, epoch_seconds=100), SIZES, 2)
    assert rule["n"] == 500

# -----------------------------------------------------------------------------
# the run lists

def test_confirm_plans_the_preregistered_runs(tiny_config, tmp_path):
    """confirm --ner-limit 1000: SST-2 seeds 100-123, each with fine-tuning, GA, GA-train, RD in that order and
    the cpu compare's settings unchanged; then NER seeds 100-115 with fine-tuning and GA at p 0.8 q 0.1 (the
    authors' NER setting), 1000 sentences, holdout 0.2, 20 epochs, patience 4, lr 5e-5, a 1000-sentence dev
    sample, --predict. train.py accepts every argv, and its defaults give NER batch 32 and max length 256."""
    args = experiments.parse_args(["confirm", "--ner-limit", "1000", "--weights", str(tiny_config),
                                   "--out", str(tmp_path)])
    base, runs = confirm.plan_confirm(args)
    sst, ner = runs[:96], runs[96:]
    assert base == tmp_path / "confirm" and len(ner) == 32
    assert [(r.info["seed"], r.info["method"]) for r in sst] == \
        [(s, m) for s in range(100, 124) for m in ("fine-tuning", "GA", "GA-train", "RD")]
    assert [(r.info["seed"], r.info["method"]) for r in ner] == \
        [(s, m) for s in range(100, 116) for m in ("fine-tuning", "GA")]
    cpu = experiments.PRESETS["cpu"]["compare"]
    for r in sst:
        a = r.argv
        assert (flag(a, "--task"), flag(a, "--limit"), flag(a, "--holdout"), flag(a, "--epochs"), flag(a, "--patience"),
                flag(a, "--lr")) == ("sst2", str(cpu["limit"]), str(cpu["holdout"]), str(cpu["epochs"]),
                                     str(cpu["patience"]), str(cpu["lr"]))
        assert "--group-by-length" in a and not {"--dev-limit", "--max-len", "--predict", "--layers"} & set(a)
        assert flag(a, "--first-pass") == ("train" if r.info["method"] == "GA-train" else None)
        ft = r.info["method"] == "fine-tuning"
        assert (flag(a, "--p"), flag(a, "--q")) == (("0", None) if ft else ("0.6", "0.8"))
    for r in ner:
        a = r.argv
        assert (flag(a, "--task"), flag(a, "--limit"), flag(a, "--holdout"), flag(a, "--epochs"), flag(a, "--patience"),
                flag(a, "--lr"), flag(a, "--dev-limit")) == ("conll2003", "1000", "0.2", "20", "4", "5e-05", "1000")
        assert "--predict" in a and r.name == f"conll2003/{'ft' if r.info['method'] == 'fine-tuning' else 'ga'}" \
                                              f"_n1000_seed{r.info['seed']}"
        ft = r.info["method"] == "fine-tuning"
        assert (flag(a, "--p"), flag(a, "--q")) == (("0", None) if ft else ("0.8", "0.1"))
    assert (settings.SETTINGS["conll2003"]["bert"]["p"], settings.SETTINGS["conll2003"]["bert"]["q"]) == (0.8, 0.1)
    row = settings.settings_row("conll2003", None, "bert")
    assert (row["lr"], row["batch_size"], row["max_len"]) == (5e-5, 32, 256)
    for r in runs:
        settings.parse_args(r.argv + ["--out", str(tmp_path / "x")])


def test_confirm_arms_and_seeds_can_be_cut(tiny_config, tmp_path):
    """--methods ft,ga,gatrain cuts RD from SST-2 (the budget rule) and leaves NER's two arms; --seeds 2
    --ner-seeds 3 --first-seed 7 plans SST-2 seeds 7-8 and NER seeds 7-9."""
    args = experiments.parse_args(["confirm", "--ner-limit", "500", "--methods", "ft,ga,gatrain", "--seeds", "2",
                                   "--ner-seeds", "3", "--first-seed", "7", "--weights", str(tiny_config),
                                   "--out", str(tmp_path)])
    _, runs = confirm.plan_confirm(args)
    assert [(r.info["task"], r.info["seed"], r.info["method"]) for r in runs] == \
        [("sst2", s, m) for s in (7, 8) for m in ("fine-tuning", "GA", "GA-train")] + \
        [("conll2003", s, m) for s in (7, 8, 9) for m in ("fine-tuning", "GA")]


def test_confirm_takes_n_from_the_pilot_or_refuses_the_ner_runs(tiny_config, tmp_path, capsys):
    """Without --ner-limit: N from the finished pilot's ner_pilot.json in --out; with no such file, or a pilot
    that has not picked N, the NER runs are left out and one line says to run ner_pilot or pass --ner-limit."""
    argv = ["confirm", "--weights", str(tiny_config), "--out", str(tmp_path)]
    _, runs = confirm.plan_confirm(experiments.parse_args(argv))
    err = capsys.readouterr().err.strip()
    assert len(runs) == 96 and len(err.splitlines()) == 1 and "ner_pilot" in err and "--ner-limit" in err
    (tmp_path / "ner_pilot.json").write_text(json.dumps({"n": None, "why": "2 pilot runs not finished: no N yet"}))
    _, runs = confirm.plan_confirm(experiments.parse_args(argv))
    assert len(runs) == 96 and "no N yet" in capsys.readouterr().err
    (tmp_path / "ner_pilot.json").write_text(json.dumps({"n": 2000}))
    _, runs = confirm.plan_confirm(experiments.parse_args(argv))
    assert len(runs) == 128 and {flag(r.argv, "--limit") for r in runs[96:]} == {"2000"}


def test_ner_pilot_plans_two_seeds_at_three_sizes(tiny_config, tmp_path):
    """ner_pilot: fine-tuning only, seeds 900 and 901 at 500, 1000 and 2000 sentences, with the NER runs'
    settings (holdout 0.2, 20 epochs, patience 4, lr 5e-5, dev sample 1000, --predict)."""
    base, runs = confirm.plan_pilot(experiments.parse_args(["ner_pilot", "--weights", str(tiny_config),
                                                            "--out", str(tmp_path)]))
    assert base == tmp_path / "ner_pilot"
    assert [(r.info["size"], r.info["seed"]) for r in runs] == [(n, s) for n in (500, 1000, 2000) for s in (900, 901)]
    for r in runs:
        a = r.argv
        assert (flag(a, "--limit"), flag(a, "--p"), flag(a, "--holdout"), flag(a, "--epochs"), flag(a, "--patience"),
                flag(a, "--lr"), flag(a, "--dev-limit"), flag(a, "--seed")) == \
            (str(r.info["size"]), "0", "0.2", "20", "4", "5e-05", "1000", str(r.info["seed"]))
        assert "--predict" in a and flag(a, "--task") == "conll2003"


@pytest.mark.parametrize("analysis, extra, ending", [("confirm", ["--ner-limit", "500"], "| H4 | GA minus fine-tuning"),
                                                     ("ner_pilot", [], "N: 6 pilot runs not finished: no N yet")])
def test_tables_only_with_nothing_run_writes_empty_tables(tiny_config, tmp_path, capsys, analysis, extra, ending):
    """--tables-only before any run: exit without error, the tables printed with no data in them (every
    hypothesis 'no data yet'), and the JSON written (the pilot's with no N)."""
    experiments.main([analysis, "--tables-only", "--out", str(tmp_path), "--weights", str(tiny_config),
                      "--data-dir", str(tmp_path / "no_data")] + extra)
    out = capsys.readouterr().out
    assert ending in out and "runs not finished yet" in out
    written = json.loads((tmp_path / f"{analysis}.json").read_text())
    if analysis == "confirm":
        assert out.count("no data yet") == 4 and written["runs_ended"] == 0 and written["runs_planned"] == 128
    else:
        assert written["n"] is None and written["pilot"] is True

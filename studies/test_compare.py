"""
Tests of compare's statistics on hand-made numbers: Student's t quantiles, the paired summary (interval,
wins/ties/losses, seeds needed), what counts as overfitting, the best constant prediction, dev loss paired
epoch by epoch, and the regime check.
"""

import math

import numpy as np
import pytest

import compare
import data
from support import metrics

# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

DATA_DIR = data.resolve_data_dir()


@pytest.mark.parametrize("prob, df, known", [(0.975, 1, 12.706), (0.975, 4, 2.776), (0.975, 9, 2.262),
                                             (0.975, 29, 2.045), (0.8, 4, 0.941), (0.8, 9, 0.883),
                                             (0.975, 1000, 1.962)])
def test_t_quantile_matches_the_tables(prob, df, known):
    """t_quantile inverts Student's t CDF: it must give the printed table values (3 decimals) for small df,
    where the t tails are far from normal, and approach the normal 1.96 for large df."""
    assert compare.t_quantile(prob, df) == pytest.approx(known, abs=1e-3)


def test_paired_summary_on_hand_made_numbers():
    """Differences 1..5: mean 3, sd sqrt(2.5), 95% CI 3 +- 2.776 * sqrt(2.5) / sqrt(5), all wins; the CI excludes
    0, so no seed count is asked for. Differences with mean 0.5 and sd 1.12 include 0: the seeds needed is the
    smallest n with n >= ((t_.975,n-1 + t_.8,n-1) sd / mean)^2, which n - 1 does not satisfy."""
    s = compare.paired_summary([1, 2, 3, 4, 5])
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert s["mean"] == pytest.approx(3) and s["sd"] == pytest.approx(math.sqrt(2.5))
    assert (s["ci_low"], s["ci_high"]) == pytest.approx((3 - half, 3 + half), abs=1e-3)
    assert (s["wins"], s["ties"], s["losses"], s["seeds_needed"]) == (5, 0, 0, None)

    d = [1.0, -1.0, 2.0, 0.0, 0.5]
    s = compare.paired_summary(d)
    mean, sd = np.mean(d), np.std(d, ddof=1)
    assert (s["wins"], s["ties"], s["losses"]) == (3, 1, 1)
    assert s["ci_low"] < 0 < s["ci_high"]
    n = s["seeds_needed"]
    need = lambda m: ((compare.t_quantile(0.975, m - 1) + compare.t_quantile(0.8, m - 1)) * sd / mean) ** 2
    assert n >= need(n) and n - 1 < need(n - 1)
    # the normal approximation (1.96 + 0.84)^2 (sd/mean)^2 is a little lower, as the t quantiles are wider
    assert 0 <= n - 7.85 * (sd / mean) ** 2 <= 3
    assert compare.paired_summary([0.0, 0.0, 1.0, -1.0])["seeds_needed"] == math.inf  # mean 0: never
    # a mean that is rounding, not 0 (MRPC's R-Drop: 8 differences that sum to 0 examples, 2.5e-6 from the
    # scores' 5 decimals; here 0.1 + 0.2 - 0.3 = 5.6e-17) once sent the count search up by ones from 1e8 or
    # more, and compare's tables hung: past MAX_SEEDS it is math.inf; a 1600-seed case below it is counted
    noise = [0.1, 0.2, -0.3]
    assert np.mean(noise) != 0 and compare.paired_summary(noise)["seeds_needed"] == math.inf
    n = compare.paired_summary([0.5 + 0.04, -0.5 + 0.04, 0.5 + 0.04, -0.5 + 0.04])["seeds_needed"]
    assert 7.85 * (0.577 / 0.04) ** 2 <= n <= compare.MAX_SEEDS


def history(dev_loss, train_loss):
    return [{"epoch": e, "dev_loss": d, "train_loss": t, "metric": 0.5} for e, (d, t) in enumerate(zip(dev_loss, train_loss), 1)]


def test_overfits_on_hand_made_histories():
    """A run overfits when its dev loss ends at least 5% above its lowest, reached earlier, while its training
    loss ends below its value at that epoch: the classic picture, and not a small wobble, a training loss that
    rose too, a dev loss still at its lowest, or a run of one epoch."""
    assert compare.overfits(history([0.70, 0.50, 0.60, 0.80], [0.60, 0.40, 0.20, 0.10]))
    assert compare.overfits(history([0.70, 0.50, 0.525], [0.6, 0.4, 0.3]))  # exactly 5% up
    assert not compare.overfits(history([0.70, 0.50, 0.52], [0.6, 0.4, 0.3]))  # 4%: within the wobble
    assert not compare.overfits(history([0.70, 0.50, 0.60], [0.6, 0.4, 0.5]))  # train loss rose as well
    assert not compare.overfits(history([0.70, 0.60, 0.50], [0.6, 0.4, 0.2]))  # dev loss still falling
    assert not compare.overfits(history([0.70], [0.6]))


def test_constant_baseline_is_the_best_constant_prediction():
    """Accuracy: the majority share; F1 of class 1: always answering 1, 2 pos / (n + pos), which beats always 0
    (F1 0) even where 1 is the minority; Pearson and Matthews: 0; entity F1 (CoNLL-2003): 0, answering O everywhere
    (no entity found: metrics.entity_scores gives F1 0). On MRPC's real dev set (279 of 408 paraphrases)
    accuracy's baseline is 68.4%, and no constant prediction does better (checked with metrics.compute_metrics)."""
    assert compare.constant_baseline("sst2", [1, 1, 1, 0]) == 0.75
    gold = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    assert compare.constant_baseline("conll2003", gold) == 0.0 == \
        metrics.compute_metrics("conll2003", [["O"] * len(y) for y in gold], gold)["f1"]
    assert compare.constant_baseline("qqp", [1, 0, 0, 0]) == 0.75  # QQP's first metric is accuracy
    assert compare.constant_baseline("stsb", [0.5, 4.0]) == 0.0 and compare.constant_baseline("cola", [0, 1]) == 0.0
    y = [1, 0, 0, 0, 1]
    f1_always_1 = metrics.compute_metrics("mrpc", [1] * 5, y)["f1"]
    assert f1_always_1 == pytest.approx(2 * 2 / (5 + 2)) and metrics.compute_metrics("mrpc", [0] * 5, y)["f1"] == 0.0
    monkey = type("T", (), {"metrics": ("f1",), "token_level": False})
    with pytest.MonkeyPatch.context() as m:
        m.setattr(data, "get_task", lambda name: monkey)
        assert compare.constant_baseline("any", y) == pytest.approx(f1_always_1)
    dev = [e.label for e in data.load_split("mrpc", "dev", DATA_DIR)] if (DATA_DIR / "MRPC").is_dir() else None
    if dev is not None:
        b = compare.constant_baseline("mrpc", dev)
        assert b == pytest.approx(279 / 408)
        assert b == max(metrics.compute_metrics("mrpc", [c] * len(dev), dev)["accuracy"] for c in (0, 1))


def test_dev_loss_curves_pair_seeds_epoch_by_epoch():
    """Early stopping ends seeds at different epochs. Each epoch's paired difference uses only the seeds where
    both arms reached it; where no seed did (in both arms, for a difference), the table prints – (not nan)."""
    ft = {0: {"history": history([0.7, 0.5], [0.6, 0.4])}, 1: {"history": history([0.9], [0.8])}}
    ga = {0: {"history": history([0.6, 0.45, 0.4], [0.6, 0.5, 0.4])}, 1: {"history": history([1.1, 0.8], [0.7, 0.6])}}
    rows = compare.epoch_rows("sst2", {"fine-tuning": ft, "GA": ga})
    by = {(r["method"], r["epoch"]): r for r in rows}
    assert by["fine-tuning", 1]["dev_loss"] == pytest.approx(0.8) and by["fine-tuning", 2]["seeds"] == 1
    assert by["GA", 1]["dev_loss_minus_ft"] == pytest.approx(((0.6 - 0.7) + (1.1 - 0.9)) / 2)
    assert by["GA", 2]["dev_loss_minus_ft"] == pytest.approx(0.45 - 0.5)  # seed 1's fine-tuning stopped at 1
    assert math.isnan(by["GA", 3]["dev_loss_minus_ft"])
    table = "\n".join(compare.compare_table([], rows, {}))
    assert "| SST-2 | GA | +0.050 -0.050 – |" in table and "nan" not in table


def results(scores, overfit):
    """Hand-made fine-tuning results, a seed each: dev at the best holdout epoch, and a history that overfits
    (dev loss down then 20% up, train loss down) or not (both down)."""
    up, down = history([0.7, 0.5, 0.6], [0.6, 0.4, 0.2]), history([0.7, 0.6, 0.5], [0.6, 0.4, 0.2])
    return {s: {"dev_at_best": v, "best_metric": v, "history": up if o else down}
            for s, (v, o) in enumerate(zip(scores, overfit))}


@pytest.mark.parametrize("scores, overfit, learns, overfits", [
    ([0.80, 0.82, 0.79, 0.81], [1, 1, 1, 0], True, True),     # the regime compare needs
    ([0.80, 0.82, 0.79, 0.81], [1, 1, 0, 0], True, False),    # 2 of 4 is not most seeds
    ([0.55, 0.56, 0.54, 0.57], [1, 1, 1, 1], False, True),    # 4.5 points above 51%: within the margin
    ([0.90, 0.90, 0.90, 0.51], [1, 1, 1, 1], False, True),    # mean far above, but one seed at the baseline
])
def test_regime_check_on_hand_made_results(scores, overfit, learns, overfits):
    """LEARNS: the fine-tuning mean at least 5 points above the constant baseline (here 51%) and every seed
    strictly above it; OVERFITS: more than half the seeds overfit. Informative only with both; otherwise the
    verdict says 'not informative at this scale' and why. No run finished: unknown."""
    g = compare.regime_check(results(scores, overfit), 0.51, compare.dev_score)
    assert (g["learns"], g["overfits"], g["informative"]) == (learns, overfits, learns and overfits)
    assert g["overfit_seeds"] == sum(overfit) and g["n"] == 4 and g["mean"] == pytest.approx(np.mean(scores))
    if learns and overfits:
        assert g["verdict"] == g["label"] == "informative"
    else:
        assert g["verdict"].startswith("not informative at this scale (")
        assert ("does not learn" in g["verdict"]) == (not learns) and ("does not overfit" in g["verdict"]) == (not overfits)
    assert compare.regime_check({}, 0.51, compare.dev_score)["label"] == "unknown"
    g = compare.regime_check(results(scores, overfit), None, compare.dev_score)  # the dev set was not found
    assert g["label"] == "unknown" and g["informative"] is None and "dev set could not be read" in g["verdict"]
    notes = [compare.regime_note(compare.regime_check(r, b, compare.dev_score))  # a figure panel's second line
             for r, b in ((results(scores, overfit), 0.51), ({}, 0.51), (results(scores, overfit), None))]
    assert notes == ["" if learns and overfits else "\nnot informative at this scale",
                     "\nregime unknown: no fine-tuning run yet", "\nregime unknown: dev set not read"]

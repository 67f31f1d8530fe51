"""
Tests of experiments.py: the statistics of `compare`, sharding, resuming, and the refusal of bad flags.
The sweeps run in-process on a tiny random BERT (2 layers, 32 channels, the default model's tokenizer),
so that a training run takes a fraction of a second; GLUE data comes from $GLUE_DIR as for the other tests
(without it, only the tests that train skip).
"""

import csv
import json
import math
import shutil

import numpy as np
import pytest
import torch

import data
import experiments
import model as modeling
import train

DATA_DIR = data.resolve_data_dir()


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    """A random 2-layer BERT with the default model's tokenizer: a real weights folder, 100x faster to train.
    The tests that take it train on RTE, so they skip without RTE data (the statistics tests still run)."""
    try:
        data.ensure_task("rte", DATA_DIR)
    except Exception as e:  # no GLUE data and no network
        pytest.skip(f"RTE data not available: {e}")
    try:
        tokenizer = modeling.default_weights_dir() / "tokenizer.json"
    except modeling.WeightsError as e:
        pytest.skip(str(e))
    d = tmp_path_factory.mktemp("tiny")
    cfg = modeling.Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
    modeling.save_pretrained(modeling.Model(cfg, 2), d)
    shutil.copyfile(tokenizer, d / "tokenizer.json")
    return d


@pytest.fixture(autouse=True)
def one_thread():
    """The sweeps run with --threads 1 (on a busy 2-core machine a tiny model is 10x faster so); main() sets
    torch's thread count for the process, so it is put back for the tests that follow."""
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def tables(folder, names, drop=("seconds",)):
    """The CSV tables (without wall-time columns) and JSON files of a sweep, by file name."""
    out = {}
    for name in names:
        path = folder / name
        if name.endswith(".csv"):
            with open(path) as f:
                out[name] = [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(f)]
        else:
            out[name] = json.loads(path.read_text())
    return out

# -----------------------------------------------------------------------------
# statistics

@pytest.mark.parametrize("prob, df, known", [(0.975, 1, 12.706), (0.975, 4, 2.776), (0.975, 9, 2.262),
                                             (0.975, 29, 2.045), (0.8, 4, 0.941), (0.8, 9, 0.883),
                                             (0.975, 1000, 1.962)])
def test_t_quantile_matches_the_tables(prob, df, known):
    """t_quantile inverts Student's t CDF: it must give the printed table values (3 decimals) for small df,
    where the t tails are far from normal, and approach the normal 1.96 for large df."""
    assert experiments.t_quantile(prob, df) == pytest.approx(known, abs=1e-3)


def test_paired_summary_on_hand_made_numbers():
    """Differences 1..5: mean 3, sd sqrt(2.5), 95% CI 3 +- 2.776 * sqrt(2.5) / sqrt(5), all wins; the CI excludes
    0, so no seed count is asked for. Differences with mean 0.5 and sd 1.12 include 0: the seeds needed is the
    smallest n with n >= ((t_.975,n-1 + t_.8,n-1) sd / mean)^2, which n - 1 does not satisfy."""
    s = experiments.paired_summary([1, 2, 3, 4, 5])
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert s["mean"] == pytest.approx(3) and s["sd"] == pytest.approx(math.sqrt(2.5))
    assert (s["ci_low"], s["ci_high"]) == pytest.approx((3 - half, 3 + half), abs=1e-3)
    assert (s["wins"], s["ties"], s["losses"], s["seeds_needed"]) == (5, 0, 0, None)

    d = [1.0, -1.0, 2.0, 0.0, 0.5]
    s = experiments.paired_summary(d)
    mean, sd = np.mean(d), np.std(d, ddof=1)
    assert (s["wins"], s["ties"], s["losses"]) == (3, 1, 1)
    assert s["ci_low"] < 0 < s["ci_high"]
    n = s["seeds_needed"]
    need = lambda m: ((experiments.t_quantile(0.975, m - 1) + experiments.t_quantile(0.8, m - 1)) * sd / mean) ** 2
    assert n >= need(n) and n - 1 < need(n - 1)
    # the normal approximation (1.96 + 0.84)^2 (sd/mean)^2 is a little lower, as the t quantiles are wider
    assert 0 <= n - 7.85 * (sd / mean) ** 2 <= 3
    assert experiments.paired_summary([0.0, 0.0, 1.0, -1.0])["seeds_needed"] == math.inf  # mean 0: never
    # a mean that is rounding, not 0 (MRPC's R-Drop: 8 differences that sum to 0 examples, 2.5e-6 from the
    # scores' 5 decimals; here 0.1 + 0.2 - 0.3 = 5.6e-17) once sent the count search up by ones from 1e8 or
    # more, and compare's tables hung: past MAX_SEEDS it is math.inf; a 1600-seed case below it is counted
    noise = [0.1, 0.2, -0.3]
    assert np.mean(noise) != 0 and experiments.paired_summary(noise)["seeds_needed"] == math.inf
    n = experiments.paired_summary([0.5 + 0.04, -0.5 + 0.04, 0.5 + 0.04, -0.5 + 0.04])["seeds_needed"]
    assert 7.85 * (0.577 / 0.04) ** 2 <= n <= experiments.MAX_SEEDS

# -----------------------------------------------------------------------------
# sharding and resuming

@pytest.mark.parametrize("n_runs, N", [(1, 1), (1, 3), (9, 2), (19, 4), (80, 8), (7, 7), (5, 9)])
def test_shards_are_a_disjoint_cover(n_runs, N):
    """Shards 1..N of a run list: every run in exactly one shard, each shard in list order, and shard sizes
    that differ by at most one (so that N copies finish at about the same time)."""
    runs = list(range(n_runs))
    shards = [experiments.shard_of(runs, (k, N)) for k in range(1, N + 1)]
    assert sorted(r for s in shards for r in s) == runs
    assert all(s == sorted(s) for s in shards)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert experiments.shard_of(runs, None) == runs


TINY = ["--threads", "1", "--task", "rte", "--values", "0.5,0.9", "--limit", "8", "--dev-limit", "8", "--max-len", "16", "--epochs", "2"]
GRID_TABLES = ["grid_rte.csv", "grid_rte.json"]


def test_two_shards_give_the_tables_of_one_process(tiny_weights, tmp_path, capsys, monkeypatch):
    """Issue 10's criterion: `grid --shard 1/2` and `--shard 2/2` into one folder write the same tables as one
    unsharded process into another (wall times aside), each run trained once. The first shard alone already
    writes tables from what is finished and says how many runs are missing, as does --tables-only. A rerun
    then reads every run back: train.run is replaced by a function that fails, and the tables come out the
    same."""
    flags = TINY + ["--weights", str(tiny_weights)]
    experiments.main(["grid", "--out", str(tmp_path / "one")] + flags)
    one = tables(tmp_path / "one", GRID_TABLES)
    capsys.readouterr()

    experiments.main(["grid", "--out", str(tmp_path / "sharded"), "--shard", "1/2"] + flags)
    out = capsys.readouterr().out
    trained_1 = out.count(": training (")
    assert "runs not finished yet" in out and (tmp_path / "sharded" / "grid_rte.csv").exists()

    def no_training(args):
        raise AssertionError(f"trained {args.out} again")
    monkeypatch.setattr(train, "run", no_training)  # --tables-only, as while the other shard runs
    experiments.main(["grid", "--out", str(tmp_path / "sharded"), "--tables-only"] + flags)
    assert f"{9 - trained_1} of 9 runs not finished yet" in capsys.readouterr().out
    monkeypatch.undo()
    experiments.main(["grid", "--out", str(tmp_path / "sharded"), "--shard", "2/2"] + flags)
    out = capsys.readouterr().out
    assert "runs not finished yet" not in out
    assert trained_1 + out.count(": training (") == 9  # 1 baseline + 2 x 2 x 2 cells, each trained once
    assert tables(tmp_path / "sharded", GRID_TABLES) == one
    assert len(one["grid_rte.csv"]) == 8 and one["grid_rte.json"]["cells_missing"] == 0
    monkeypatch.setattr(train, "run", no_training)
    experiments.main(["grid", "--out", str(tmp_path / "sharded")] + flags)
    assert capsys.readouterr().out.count("done before, read back") == 9
    assert tables(tmp_path / "sharded", GRID_TABLES) == one


def test_run_once_resumes_exactly_when_a_state_of_the_same_settings_is_there(tmp_path, monkeypatch):
    """run_once passes --resume when train_state.pt is there and metrics.json (written after it each epoch)
    is unfinished with the same settings, or absent; not when the settings changed (a fresh start) or there
    is no state; and trains nothing when the run finished with the same settings."""
    calls = []
    monkeypatch.setattr(train, "run", lambda args: calls.append(args.resume) or {"finished": True})
    argv = ["--task", "rte", "--epochs", "3", "--no-checkpoint"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def case(state, metrics_argv=None, finished=False):
        for f in run_dir.iterdir():
            f.unlink()
        if state:
            (run_dir / train.STATE).write_bytes(b"state")
        if metrics_argv is not None:
            args = vars(experiments.train_args(run_dir, metrics_argv))
            (run_dir / "metrics.json").write_text(json.dumps({"args": args, "finished": finished}))
        calls.clear()
        experiments.run_once(run_dir, argv, "run")
        return calls

    assert case(state=False) == [False]
    assert case(state=True) == [True]
    assert case(state=True, metrics_argv=argv) == [True]
    assert case(state=True, metrics_argv=argv[:3] + ["4"] + argv[4:]) == [False]  # --epochs 4 then: start again
    assert case(state=False, metrics_argv=argv) == [False]
    assert case(state=True, metrics_argv=argv, finished=True) == []


def test_a_diverged_run_is_kept_as_failed_and_a_setup_error_stops_the_sweep(tmp_path, monkeypatch, capsys):
    """train.py exits on a non-finite loss with train.Diverged: that run is written as failed.json and read
    back, not retried, so one diverged run does not end a sweep. A run whose folder another live process
    holds (train.Busy) is skipped and left to it. Any other exit (a bad device, a --max-len too long) would
    stop every run alike: it stops the sweep with train.py's message and leaves nothing behind."""
    def exits(message, kind=SystemExit):
        def run(args):
            raise kind(message)  # as train.py's sys.exit(message), or its Diverged
        return run
    argv = ["--task", "rte", "--no-checkpoint"]
    monkeypatch.setattr(train, "run", exits("error: epoch 1: training loss is nan; try a smaller --lr", train.Diverged))
    res = experiments.run_once(tmp_path / "nan", argv, "run")
    assert "loss is nan" in res["error"] and math.isnan(res["best_metric"])
    monkeypatch.setattr(train, "run", lambda args: pytest.fail("a failed run was retried"))
    assert experiments.run_once(tmp_path / "nan", argv, "run")["error"] == res["error"]
    monkeypatch.setattr(train, "run", exits("error: runs/x/run.lock: another run is using runs/x", train.Busy))
    assert experiments.run_once(tmp_path / "busy", argv, "run") is None  # left to the process that holds it
    assert "another process is training it; skipped" in capsys.readouterr().out and not (tmp_path / "busy").exists()

    def finished_meanwhile(args):  # the other process finished the run while this one set up its --resume
        (tmp_path / "raced").mkdir()
        (tmp_path / "raced" / "metrics.json").write_text(json.dumps({"args": vars(args), "finished": True}))
        raise SystemExit(f"error: --resume: nothing to resume: the run in {tmp_path / 'raced'} already finished")
    monkeypatch.setattr(train, "run", finished_meanwhile)
    assert experiments.run_once(tmp_path / "raced", argv, "run")["finished"]
    monkeypatch.setattr(train, "run", exits("error: --device cuda: no CUDA GPU is visible"))
    with pytest.raises(SystemExit, match="--device cuda"):
        experiments.run_once(tmp_path / "setup", argv, "run")
    assert not (tmp_path / "setup").exists()


def test_compare_pairs_seeds_and_reports_dev_at_the_best_holdout_epoch(tiny_weights, tmp_path, capsys):
    """A tiny compare (RTE, 2 seeds, the 5 arms of the cpu preset): every run selects on a holdout split; the
    summary's paired differences are the per-seed differences of compare_runs.csv's dev_at_best; the Markdown
    table is printed, with the regime check (a random 2-layer model on 16 examples learns nothing: RTE is 'not
    informative at this scale' and its rows are set apart); and a shard that finds other runs missing still
    writes its tables and figure."""
    flags = ["--threads", "1", "--task", "rte", "--seeds", "2", "--limit", "16", "--dev-limit", "8", "--max-len", "16",
             "--epochs", "2", "--weights", str(tiny_weights), "--out", str(tmp_path)]
    experiments.main(["compare", "--shard", "1/3"] + flags)
    assert "runs not finished yet" in capsys.readouterr().out and (tmp_path / "compare.png").exists()
    experiments.main(["compare"] + flags)
    out = capsys.readouterr().out
    assert "| RTE dev (accuracy) | GA p=" in out and "| RTE dev (accuracy) | R-Drop α=1.0 |" in out
    assert "minus fine-tuning [95% CI]" in out and "Not informative at this scale" in out
    t = tables(tmp_path, ["compare.csv", "compare_runs.csv", "compare_epochs.csv", "compare.json"])
    assert t["compare.json"]["regime"]["rte"]["label"] == "not informative at this scale"
    assert t["compare.json"]["preset"] == "cpu/compare" and t["compare.json"]["regime"]["rte"]["n"] == 2
    runs = t["compare_runs.csv"]
    assert len(runs) == 10 and {r["selection"] for r in runs} == {"holdout"}
    dev = {(r["method"], r["seed"]): float(r["dev_at_best"]) for r in runs}
    for row in t["compare.csv"]:
        if row["method"] != "fine-tuning":
            d = [dev[(row["method"], s)] - dev[("fine-tuning", s)] for s in ("0", "1")]
            assert float(row["diff_mean"]) == pytest.approx(np.mean(d), abs=1e-5)
            assert int(row["diff_wins"]) == sum(x > 0 for x in d)
    arms = [experiments.ARM_NAMES[k] for k in experiments.PRESETS["cpu"]["compare"]["methods"]]
    assert {(r["method"], r["epoch"]) for r in t["compare_epochs.csv"]} == {(m, e) for m in arms for e in "12"}

# -----------------------------------------------------------------------------
# compare's arms, regime check and PAWS rows, on hand-made results

def history(dev_loss, train_loss):
    return [{"epoch": e, "dev_loss": d, "train_loss": t, "metric": 0.5} for e, (d, t) in enumerate(zip(dev_loss, train_loss), 1)]


def test_overfits_on_hand_made_histories():
    """A run overfits when its dev loss ends at least 5% above its lowest, reached earlier, while its training
    loss ends below its value at that epoch: the classic picture, and not a small wobble, a training loss that
    rose too, a dev loss still at its lowest, or a run of one epoch."""
    assert experiments.overfits(history([0.70, 0.50, 0.60, 0.80], [0.60, 0.40, 0.20, 0.10]))
    assert experiments.overfits(history([0.70, 0.50, 0.525], [0.6, 0.4, 0.3]))  # exactly 5% up
    assert not experiments.overfits(history([0.70, 0.50, 0.52], [0.6, 0.4, 0.3]))  # 4%: within the wobble
    assert not experiments.overfits(history([0.70, 0.50, 0.60], [0.6, 0.4, 0.5]))  # train loss rose as well
    assert not experiments.overfits(history([0.70, 0.60, 0.50], [0.6, 0.4, 0.2]))  # dev loss still falling
    assert not experiments.overfits(history([0.70], [0.6]))


def test_constant_baseline_is_the_best_constant_prediction():
    """Accuracy: the majority share; F1 of class 1: always answering 1, 2 pos / (n + pos), which beats always 0
    (F1 0) even where 1 is the minority; Pearson and Matthews: 0. On MRPC's real dev set (279 of 408 paraphrases)
    accuracy's baseline is 68.4%, and no constant prediction does better (checked with data.compute_metrics)."""
    assert experiments.constant_baseline("sst2", [1, 1, 1, 0]) == 0.75
    assert experiments.constant_baseline("qqp", [1, 0, 0, 0]) == 0.75  # QQP's first metric is accuracy
    assert experiments.constant_baseline("stsb", [0.5, 4.0]) == 0.0 and experiments.constant_baseline("cola", [0, 1]) == 0.0
    y = [1, 0, 0, 0, 1]
    f1_always_1 = data.compute_metrics("mrpc", [1] * 5, y)["f1"]
    assert f1_always_1 == pytest.approx(2 * 2 / (5 + 2)) and data.compute_metrics("mrpc", [0] * 5, y)["f1"] == 0.0
    monkey = type("T", (), {"metrics": ("f1",)})
    with pytest.MonkeyPatch.context() as m:
        m.setattr(data, "get_task", lambda name: monkey)
        assert experiments.constant_baseline("any", y) == pytest.approx(f1_always_1)
    dev = [e.label for e in data.load_split("mrpc", "dev", DATA_DIR)] if (DATA_DIR / "MRPC").is_dir() else None
    if dev is not None:
        b = experiments.constant_baseline("mrpc", dev)
        assert b == pytest.approx(279 / 408)
        assert b == max(data.compute_metrics("mrpc", [c] * len(dev), dev)["accuracy"] for c in (0, 1))


def test_dev_loss_curves_pair_seeds_epoch_by_epoch():
    """Early stopping ends seeds at different epochs. Each epoch's paired difference uses only the seeds where
    both arms reached it; where no fine-tuning seed did, the table prints – (not nan)."""
    ft = {0: {"history": history([0.7, 0.5], [0.6, 0.4])}, 1: {"history": history([0.9], [0.8])}}
    ga = {0: {"history": history([0.6, 0.45, 0.4], [0.6, 0.5, 0.4])}, 1: {"history": history([1.1, 0.8], [0.7, 0.6])}}
    rows = experiments.epoch_rows("sst2", {"fine-tuning": ft, "GA": ga})
    by = {(r["method"], r["epoch"]): r for r in rows}
    assert by["fine-tuning", 1]["dev_loss"] == pytest.approx(0.8) and by["fine-tuning", 2]["seeds"] == 1
    assert by["GA", 1]["dev_loss_minus_ft"] == pytest.approx(((0.6 - 0.7) + (1.1 - 0.9)) / 2)
    assert by["GA", 2]["dev_loss_minus_ft"] == pytest.approx(0.45 - 0.5)  # seed 1's fine-tuning stopped at 1
    assert math.isnan(by["GA", 3]["dev_loss_minus_ft"])
    table = "\n".join(experiments.compare_table([], rows, {}))
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
    g = experiments.regime_check(results(scores, overfit), 0.51, experiments.dev_score)
    assert (g["learns"], g["overfits"], g["informative"]) == (learns, overfits, learns and overfits)
    assert g["overfit_seeds"] == sum(overfit) and g["n"] == 4 and g["mean"] == pytest.approx(np.mean(scores))
    if learns and overfits:
        assert g["verdict"] == g["label"] == "informative"
    else:
        assert g["verdict"].startswith("not informative at this scale (")
        assert ("does not learn" in g["verdict"]) == (not learns) and ("does not overfit" in g["verdict"]) == (not overfits)
    assert experiments.regime_check({}, 0.51, experiments.dev_score)["label"] == "unknown"


def test_compare_arms_have_their_train_flags(tiny_weights, tmp_path):
    """The cpu compare's runs, task by task then seed by seed: every arm of a seed shares its seed and the
    preset's settings (1000 examples, holdout 0.2, 10 epochs, patience 3, full dev, grouped batches); GA, GA-train
    and RD carry Table 4's p and q, GA-train the authors' first pass (--first-pass train), R-Drop --rdrop at half
    the paper's alpha 1.0 (train.py averages the two passes' losses) and no dropping, fine-tuning --p 0; every
    MRPC run, and no SST-2 run, asks for PAWS (--ood paws). train.py accepts each argv with those values. The old
    preset, compare_small, keeps its four arms (AA among them) and the first-N rows (--limit-first)."""
    args = experiments.parse_args(["compare", "--weights", str(tiny_weights), "--out", str(tmp_path)])
    base, runs = experiments.plan_compare(args)
    assert base == tmp_path / "compare" and len(runs) == 2 * 8 * 5
    assert [r.info["task"] for r in runs] == ["sst2"] * 40 + ["mrpc"] * 40
    assert [r.info["seed"] for r in runs[:10]] == [0] * 5 + [1] * 5
    flag = lambda argv, name: argv[argv.index(name) + 1] if name in argv else None
    t4 = {t: train.SETTINGS[t]["bert"] for t in ("sst2", "mrpc")}  # the tiny model is a BERT
    for r in runs:
        a, task, key = r.argv, r.info["task"], r.name.split("/")[1].split("_")[0]
        assert (flag(a, "--limit"), flag(a, "--holdout"), flag(a, "--epochs"), flag(a, "--patience")) == ("1000", "0.2", "10", "3")
        assert "--dev-limit" not in a and "--group-by-length" in a and flag(a, "--seed") == str(r.info["seed"])
        assert flag(a, "--ood") == ("paws" if task == "mrpc" else None)
        expected = {"ft": ("0", None, None, None, None),
                    "ga": (str(t4[task]["p"]), str(t4[task]["q"]), "ga", None, None),
                    "gatrain": (str(t4[task]["p"]), str(t4[task]["q"]), "ga", "train", None),
                    "rd": (str(t4[task]["p"]), str(t4[task]["q"]), "rd", None, None),
                    "rdrop": ("0", None, None, None, "0.5")}[key]
        assert tuple(flag(a, f) for f in ("--p", "--q", "--attribution", "--first-pass", "--rdrop")) == expected, r.name
        targs = train.parse_args(a + ["--out", str(tmp_path / "x")])
        assert (targs.rdrop, targs.first_pass, targs.ood) == (0.5 if key == "rdrop" else 0.0,
                                                               "train" if key == "gatrain" else "eval",
                                                               "paws" if task == "mrpc" else None)
    assert experiments.RDROP_ALPHA == 1.0 and {r.info["alpha"] for r in runs if "rdrop" in r.name} == {1.0}
    args = experiments.parse_args(["compare_small", "--weights", str(tiny_weights), "--out", str(tmp_path)])
    base, small = experiments.plan_compare(args, "compare_small")
    assert base == tmp_path / "compare_small" and len(small) == 3 * 5 * 4
    assert {r.info["method"] for r in small} == {"fine-tuning", "GA", "RD", "AA"}
    assert all("--limit-first" in r.argv and flag(r.argv, "--limit") == "200" and flag(r.argv, "--dev-limit") == "200"
               for r in small)


def test_a_folder_of_another_compare_preset_is_refused(tiny_weights, tmp_path):
    """compare.json names its preset; compare into a folder that another preset's compare.json claims stops
    before any run, naming both, so that the new runs cannot overwrite the old ones of the same names. A
    compare.json with no name is the compare of before issue 17, now compare_small, which may go on there."""
    (tmp_path / "compare.json").write_text(json.dumps({"summary": []}))
    flags = ["--weights", str(tiny_weights), "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="made by `compare_small --scale cpu`"):
        experiments.plan_compare(experiments.parse_args(["compare"] + flags))
    (tmp_path / "compare.json").write_text(json.dumps({"preset": "cpu/compare"}))
    assert len(experiments.plan_compare(experiments.parse_args(["compare"] + flags))[1]) == 80


@pytest.mark.skipif(not (DATA_DIR / "MRPC").is_dir(), reason="no MRPC data")
def test_paws_rows_are_paired_differences_on_hand_made_results(tmp_path, capsys):
    """MRPC's runs carry result["ood"] (train.py --ood paws). The report gives, beside the dev rows, one row per
    arm evaluated on PAWS: the mean over seeds of ood accuracy and, for each arm, the paired differences from
    fine-tuning on the same seed, with wins/ties/losses over the seeds both finished (a seed without an ood
    result is left out of the pairs). The rows go under 'Evidence' when MRPC's fine-tuning learns and overfits,
    under 'Not informative at this scale' when it does not."""
    args = experiments.parse_args(["compare", "--task", "mrpc", "--seeds", "4", "--methods", "ft,ga,rdrop",
                                   "--data-dir", str(DATA_DIR), "--out", str(tmp_path)])
    dev = {"fine-tuning": [0.80, 0.81, 0.79, 0.82], "GA": [0.81, 0.80, 0.80, 0.83], "R-Drop": [0.82, 0.82, 0.80, 0.81]}
    paws = {"fine-tuning": [0.40, 0.45, 0.42, None], "GA": [0.43, 0.44, 0.47, 0.50], "R-Drop": [0.40, 0.46, 0.41, 0.49]}

    def report(dev_scores, out):
        runs, res = [], []
        for seed in range(4):
            for method, key in (("fine-tuning", "ft"), ("GA", "ga"), ("R-Drop", "rdrop")):
                runs.append(experiments.Run(f"mrpc/{key}_seed{seed}", [], {"task": "mrpc", "method": method, "seed": seed,
                            "p": 0.5 if key == "ga" else 0, "q": 0.8 if key == "ga" else 0,
                            "alpha": 1.0 if key == "rdrop" else 0}))
                acc = paws[method][seed]
                res.append({"best_metric": 0.8, "dev_at_best": dev_scores[method][seed], "best_epoch": 2,
                            "history": history([0.6, 0.5, 0.7], [0.6, 0.4, 0.2]),
                            **({"ood": {"task": "paws", "accuracy": acc, "f1": acc / 2}} if acc is not None else {})})
        out.mkdir()
        experiments.report_compare(args, out / "compare", runs, res)
        return tables(out, ["compare.csv", "compare_runs.csv", "compare.json"]), capsys.readouterr().out

    t, printed = report(dev, tmp_path / "learns")
    rows = {r["method"]: r for r in t["compare.csv"] if r["evaluated_on"] == "paws"}
    assert set(rows) == {"fine-tuning", "GA", "R-Drop"} and rows["fine-tuning"]["seeds"] == "3"
    for method in ("GA", "R-Drop"):
        d = [paws[method][s] - paws["fine-tuning"][s] for s in range(3)]
        assert float(rows[method]["diff_mean"]) == pytest.approx(np.mean(d), abs=1e-5)
        assert (int(rows[method]["diff_n"]), int(rows[method]["diff_wins"]), int(rows[method]["diff_ties"])) == \
            (3, sum(x > 0 for x in d), sum(x == 0 for x in d))
    assert float(rows["GA"]["mean"]) == pytest.approx(np.mean(paws["GA"]), abs=1e-5)
    assert {r["regime"] for r in t["compare.csv"]} == {"informative"}
    assert sum(r.get("ood_accuracy", "") != "" for r in t["compare_runs.csv"]) == 11
    evidence = printed.split("Evidence")[1].split("dev loss per epoch")[0]
    assert "| MRPC → PAWS test (accuracy) | GA p=0.5 q=0.8 |" in evidence and "Not informative" not in printed

    stuck = {m: [0.69, 0.70, 0.684, 0.71] for m in dev}  # about MRPC's 68.4% majority: fine-tuning did not learn
    t, printed = report(stuck, tmp_path / "stuck")
    assert {r["regime"] for r in t["compare.csv"]} == {"not informative at this scale"}
    assert "does not learn" in t["compare.json"]["regime"]["mrpc"]["verdict"]
    assert "| MRPC → PAWS test (accuracy) | GA p=0.5 q=0.8 |" in printed.split("Not informative at this scale (")[1]

# -----------------------------------------------------------------------------
# bad flags

@pytest.mark.parametrize("argv, flag", [
    (["grid", "--shard", "0/2"], "--shard"), (["grid", "--shard", "3/2"], "--shard"),
    (["grid", "--shard", "a/b"], "--shard"), (["grid", "--shard", "2"], "--shard"),
    (["seeds", "--seeds", "0"], "--seeds"), (["grid", "--values", "0.5,1.5"], "--values"),
    (["grid", "--values", ""], "--values"), (["grid", "--epochs", "0"], "--epochs"),
    (["grid", "--task", "imdb"], "--task"), (["grid", "--task", "rte,mrpc"], "--task"),
    (["grid", "--threads", "0"], "--threads"), (["compare", "--holdout", "1"], "--holdout"),
    (["compare", "--lr", "-1"], "--lr"), (["seeds", "--p", "2"], "--p"), (["grid", "--dev-limit", "-1"], "--dev-limit"),
    (["compare", "--methods", "ga,xx"], "--methods"), (["grid", "--methods", "ga"], "--methods"),
    (["grid", "--scale", "gpu-minilm"], "--scale"), (["compare_small", "--scale", "gpu"], "--scale"),
])
def test_bad_flags_are_refused_by_name_in_one_line(argv, flag, capsys):
    """Each bad value stops before any work with exit status 2 and one line that names the flag."""
    with pytest.raises(SystemExit) as e:
        experiments.main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and flag in err, err


def test_out_on_a_file_and_a_head_out_of_range_are_refused(tiny_weights, tmp_path, capsys):
    """--out naming a file, and figure1's --head beyond the model's heads (2 here), stop with one line
    naming the flag, before any training."""
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(SystemExit):
        experiments.main(["grid", "--out", str(f)])
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        experiments.main(["figure1", "--weights", str(tiny_weights), "--head", "2", "--out", str(tmp_path / "o")])
    assert "--head 2" in str(e.value.code) and "2 heads" in str(e.value.code)
    assert not (tmp_path / "o").exists()

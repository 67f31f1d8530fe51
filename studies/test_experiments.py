"""
Tests of the studies (experiments.py and its modules sweep, compare, paper): the statistics of `compare`,
sharding, resuming, seed ranges, and the refusal of bad flags.
The sweeps run in-process on a tiny random BERT (2 layers, 32 channels, the default model's tokenizer),
so that a training run takes a fraction of a second; GLUE data comes from $GLUE_DIR as for the other tests
(without it, only the tests that train skip).
"""

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from support import checkpoint
import compare
import data
from support import download
import experiments
import model as modeling
from support import settings
from support import state
import sweep
import train

# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

DATA_DIR = data.resolve_data_dir()


TINY_CONFIG = modeling.Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                              max_position_embeddings=64)


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    """A random 2-layer BERT with the default model's tokenizer: a real weights folder, 100x faster to train.
    The tests that take it train on RTE, so they skip without RTE data (the statistics tests still run)."""
    try:
        download.ensure_task("rte", DATA_DIR)
    except Exception as e:  # no GLUE data and no network
        pytest.skip(f"RTE data not available: {e}")
    try:
        tokenizer = checkpoint.default_weights_dir() / "tokenizer.json"
    except checkpoint.WeightsError as e:
        pytest.skip(str(e))
    d = tmp_path_factory.mktemp("tiny")
    checkpoint.save_pretrained(modeling.Model(TINY_CONFIG, 2), d)
    shutil.copyfile(tokenizer, d / "tokenizer.json")
    return d


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    """The same tiny BERT without a tokenizer: enough to plan runs and report on hand-made results (a plan reads
    the model type from config.json for Table 4's p and q), with no data or installed weights needed."""
    d = tmp_path_factory.mktemp("tiny_config")
    checkpoint.save_pretrained(modeling.Model(TINY_CONFIG, 2), d)
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
# sharding and resuming

@pytest.mark.parametrize("n_runs, N", [(1, 1), (1, 3), (9, 2), (19, 4), (80, 8), (7, 7), (5, 9)])
def test_shards_are_a_disjoint_cover(n_runs, N):
    """Shards 1..N of a run list: every run in exactly one shard, each shard in list order, and shard sizes
    that differ by at most one (so that N copies finish at about the same time)."""
    runs = list(range(n_runs))
    shards = [sweep.shard_of(runs, (k, N)) for k in range(1, N + 1)]
    assert sorted(r for s in shards for r in s) == runs
    assert all(s == sorted(s) for s in shards)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert sweep.shard_of(runs, None) == runs


TINY = ["--threads", "1", "--task", "rte", "--values", "0.5,0.9", "--limit", "8", "--dev-limit", "8", "--max-len", "16", "--epochs", "2"]
GRID_TABLES = ["grid_rte.csv", "grid_rte.json"]


def test_two_shards_give_the_tables_of_one_process(tiny_weights, tmp_path, capsys, monkeypatch):
    """`grid --shard 1/2` and `--shard 2/2` into one folder write the same tables as one
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


def test_a_shard_stopped_by_sigterm_saves_its_run_and_the_same_command_resumes_it(tiny_weights, tmp_path):
    """SIGTERM to a sweep (as a scheduler preempts a job) inside its second run: that run's step finishes and
    its state is saved inside the epoch, the process exits 75 and says to rerun the same command; the rerun
    resumes that run where it stopped and ends with the tables of a sweep never interrupted."""
    flags = TINY[:TINY.index("--limit")] + ["--limit", "48", "--batch-size", "8", "--dev-limit", "8", "--max-len",
                                            "16", "--epochs", "2", "--weights", str(tiny_weights)]
    experiments.main(["grid", "--out", str(tmp_path / "ref")] + flags)
    cmd = [sys.executable, str(Path(experiments.__file__)), "grid", "--out", str(tmp_path / "stopped")] + flags
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = 0
    for line in proc.stdout:
        seen += line.startswith("epoch 1 (")
        if seen == 2:  # the second run's first epoch is done: its second is under way
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75 and "Traceback" not in err, err[-2000:]
    assert "rerun the same command to resume" in err
    states = [torch.load(p, weights_only=False) for p in (tmp_path / "stopped").rglob(state.STATE)]
    assert len(states) == 1 and states[0]["in_epoch"]["epoch"] == 2
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count(": resuming (") == 1 and r.stdout.count("done before, read back") == 1
    assert tables(tmp_path / "stopped", GRID_TABLES) == tables(tmp_path / "ref", GRID_TABLES)


def test_run_once_resumes_exactly_when_a_state_of_the_same_settings_is_there(tmp_path, monkeypatch):
    """run_once passes --resume when train_state.pt is there and metrics.json (written after it each epoch)
    is unfinished with the same settings, or absent; not when the settings changed (a fresh start, the old
    state removed first) or there is no state; and trains nothing when the run finished with the same settings."""
    calls = []
    monkeypatch.setattr(train, "run", lambda args: calls.append(args.resume) or {"finished": True})
    argv = ["--task", "rte", "--epochs", "3", "--no-checkpoint"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def case(saved, metrics_argv=None, finished=False, saved_later=False):
        for f in run_dir.iterdir():
            f.unlink()
        if saved:
            (run_dir / state.STATE).write_bytes(b"state")
        if metrics_argv is not None:
            args = vars(sweep.train_args(run_dir, metrics_argv))
            (run_dir / "metrics.json").write_text(json.dumps({"args": args, "finished": finished}))
        if saved_later:  # the state of a run started after that metrics.json was written
            later = (run_dir / "metrics.json").stat().st_mtime_ns + 10**9
            os.utime(run_dir / state.STATE, ns=(later, later))
        calls.clear()
        sweep.run_once(run_dir, argv, "run")
        return calls

    assert case(saved=False) == [False]
    assert case(saved=True) == [True]
    assert case(saved=True, metrics_argv=argv) == [True]
    assert case(saved=True, metrics_argv=argv[:3] + ["4"] + argv[4:]) == [False]  # --epochs 4 then: start again
    assert not (run_dir / state.STATE).exists()  # that other run's state removed: train.py would refuse it
    assert case(saved=True, metrics_argv=argv[:3] + ["4"] + argv[4:], saved_later=True) == [True]  # a later run's
    assert (run_dir / state.STATE).exists()
    assert case(saved=False, metrics_argv=argv) == [False]
    assert case(saved=True, metrics_argv=argv, finished=True) == []


def test_a_diverged_run_is_kept_as_failed_and_a_setup_error_stops_the_sweep(tmp_path, monkeypatch, capsys):
    """train.py exits on a non-finite loss with train.Diverged: that run is written as failed.json and read
    back, not retried, so one diverged run does not end a sweep. A run whose folder another live process
    holds (state.Busy) is skipped and left to it. Any other exit (a bad device, a --max-len too long) would
    stop every run alike: it stops the sweep with train.py's message and leaves nothing behind."""
    def exits(message, kind=SystemExit):
        def run(args):
            raise kind(message)  # as train.py's sys.exit(message), or its Diverged
        return run
    argv = ["--task", "rte", "--no-checkpoint"]
    monkeypatch.setattr(train, "run", exits("error: epoch 1: training loss is nan; try a smaller --lr", train.Diverged))
    res = sweep.run_once(tmp_path / "nan", argv, "run")
    assert "loss is nan" in res["error"] and math.isnan(res["best_metric"])
    monkeypatch.setattr(train, "run", lambda args: pytest.fail("a failed run was retried"))
    assert sweep.run_once(tmp_path / "nan", argv, "run")["error"] == res["error"]
    monkeypatch.setattr(train, "run", exits("error: runs/x/run.lock: another run is using runs/x", state.Busy))
    assert sweep.run_once(tmp_path / "busy", argv, "run") is None  # left to the process that holds it
    assert "another process is training it; skipped" in capsys.readouterr().out and not (tmp_path / "busy").exists()

    def finished_meanwhile(args):  # the other process finished the run while this one set up its --resume
        (tmp_path / "raced").mkdir()
        (tmp_path / "raced" / "metrics.json").write_text(json.dumps({"args": vars(args), "finished": True}))
        raise SystemExit(f"error: --resume: nothing to resume: the run in {tmp_path / 'raced'} already finished")
    monkeypatch.setattr(train, "run", finished_meanwhile)
    assert sweep.run_once(tmp_path / "raced", argv, "run")["finished"]
    monkeypatch.setattr(train, "run", exits("error: --device cuda: no CUDA GPU is visible"))
    with pytest.raises(SystemExit, match="--device cuda"):
        sweep.run_once(tmp_path / "setup", argv, "run")
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
    arms = [compare.ARM_NAMES[k] for k in experiments.PRESETS["cpu"]["compare"]["methods"]]
    assert {(r["method"], r["epoch"]) for r in t["compare_epochs.csv"]} == {(m, e) for m in arms for e in "12"}

# -----------------------------------------------------------------------------
# compare's arms, presets and PAWS rows, on hand-made results

def history(dev_loss, train_loss):
    return [{"epoch": e, "dev_loss": d, "train_loss": t, "metric": 0.5} for e, (d, t) in enumerate(zip(dev_loss, train_loss), 1)]


def test_compare_arms_have_their_train_flags(tiny_weights, tmp_path):
    """The cpu compare's runs, task by task then seed by seed: every arm of a seed shares its seed and the
    preset's settings (1000 examples, holdout 0.2, 10 epochs, patience 3, full dev, grouped batches); GA, GA-train
    and RD carry Table 4's p and q, GA-train the authors' first pass (--first-pass train), R-Drop --rdrop at half
    the paper's alpha 1.0 (train.py averages the two passes' losses) and no dropping, fine-tuning --p 0; every
    MRPC run, and no SST-2 run, asks for PAWS (--ood paws). train.py accepts each argv with those values. The old
    preset, compare_small, keeps its four arms (AA among them) and the first-N rows (--limit-first)."""
    args = experiments.parse_args(["compare", "--weights", str(tiny_weights), "--out", str(tmp_path)])
    base, runs = compare.plan_compare(args)
    assert base == tmp_path / "compare" and len(runs) == 2 * 8 * 5
    assert [r.info["task"] for r in runs] == ["sst2"] * 40 + ["mrpc"] * 40
    assert [r.info["seed"] for r in runs[:10]] == [0] * 5 + [1] * 5
    flag = lambda argv, name: argv[argv.index(name) + 1] if name in argv else None
    t4 = {t: settings.SETTINGS[t]["bert"] for t in ("sst2", "mrpc")}  # the tiny model is a BERT
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
        targs = settings.parse_args(a + ["--out", str(tmp_path / "x")])
        assert (targs.rdrop, targs.first_pass, targs.ood) == (0.5 if key == "rdrop" else 0.0,
                                                               "train" if key == "gatrain" else "eval",
                                                               "paws" if task == "mrpc" else None)
    assert compare.RDROP_ALPHA == 1.0 and {r.info["alpha"] for r in runs if "rdrop" in r.name} == {1.0}
    args = experiments.parse_args(["compare_small", "--weights", str(tiny_weights), "--out", str(tmp_path)])
    base, small = compare.plan_compare(args, "compare_small")
    assert base == tmp_path / "compare_small" and len(small) == 3 * 5 * 4
    assert {r.info["method"] for r in small} == {"fine-tuning", "GA", "RD", "AA"}
    assert all("--limit-first" in r.argv and flag(r.argv, "--limit") == "200" and flag(r.argv, "--dev-limit") == "200"
               for r in small)


def test_a_folder_of_another_compare_preset_is_refused(tiny_weights, tmp_path):
    """compare.json names its preset; compare into a folder that another preset's compare.json claims stops
    before any run, naming both, so that the new runs cannot overwrite the old ones of the same names. A
    compare.json with no name is compare_small's, which may go on there."""
    (tmp_path / "compare.json").write_text(json.dumps({"summary": []}))
    flags = ["--weights", str(tiny_weights), "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="made by `compare_small --scale cpu`"):
        compare.plan_compare(experiments.parse_args(["compare"] + flags))
    (tmp_path / "compare.json").write_text(json.dumps({"preset": "cpu/compare"}))
    assert len(compare.plan_compare(experiments.parse_args(["compare"] + flags))[1]) == 80


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
                runs.append(sweep.Run(f"mrpc/{key}_seed{seed}", [], {"task": "mrpc", "method": method, "seed": seed,
                            "p": 0.5 if key == "ga" else 0, "q": 0.8 if key == "ga" else 0,
                            "alpha": 1.0 if key == "rdrop" else 0}))
                acc = paws[method][seed]
                res.append({"best_metric": 0.8, "dev_at_best": dev_scores[method][seed], "best_epoch": 2,
                            "history": history([0.6, 0.5, 0.7], [0.6, 0.4, 0.2]),
                            **({"ood": {"task": "paws", "accuracy": acc, "f1": acc / 2}} if acc is not None else {})})
        out.mkdir()
        compare.report_compare(args, out / "compare", runs, res)
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
# seed ranges: --first-seed F --seeds N runs seeds F..F+N-1, and the tables count those alone

def compare_args(weights, out, first_seed, n=3):
    return experiments.parse_args(["compare", "--task", "rte", "--methods", "ft,ga", "--seeds", str(n),
                                   "--first-seed", str(first_seed), "--weights", str(weights), "--out", str(out),
                                   "--data-dir", str(out / "no_data")])


def test_first_seed_plans_its_range_and_nothing_else(tiny_config, tmp_path):
    """--first-seed 100 --seeds 24: compare plans seeds 100..123 for every arm, each run's folder and train.py
    --seed name its seed, and no seed below 100 appears; the few-shot analysis (seeds) takes the same range.
    The largest range train.py accepts, up to seed 2**32 - 1, is planned too."""
    base, runs = compare.plan_compare(compare_args(tiny_config, tmp_path, 100, 24))
    assert [r.info["seed"] for r in runs] == [s for s in range(100, 124) for _ in ("ft", "ga")]
    for r in runs:
        assert r.name == f"rte/{r.name.split('/')[1].split('_')[0]}_seed{r.info['seed']}"
        assert r.argv[r.argv.index("--seed") + 1] == str(r.info["seed"])
    args = experiments.parse_args(["seeds", "--task", "rte", "--shots", "16", "--seeds", "2", "--first-seed", "100",
                                   "--weights", str(tiny_config), "--out", str(tmp_path)])
    _, runs = experiments.ANALYSES["seeds"][0](args)
    assert sorted(int(r.argv[r.argv.index("--seed") + 1]) for r in runs) == [100, 100, 101, 101]
    assert {r.name.rsplit("_", 1)[1] for r in runs} == {"seed100", "seed101"}
    _, runs = compare.plan_compare(compare_args(tiny_config, tmp_path, 2**32 - 2, 2))
    assert {r.info["seed"] for r in runs} == {2**32 - 2, 2**32 - 1}
    assert sweep.seed_range([100, 101, 102]) == "seeds 100-102" and sweep.seed_range([7]) == "seed 7"


def hand_made(runs, score):
    """A finished result for each planned run: dev score(seed, method) at the best holdout epoch, and a history
    that overfits."""
    return [{"best_metric": 0.5, "dev_at_best": score(r.info["seed"], r.info["method"]), "best_epoch": 2,
             "selection": "holdout", "history": history([0.6, 0.5, 0.7], [0.6, 0.4, 0.2]), "finished": True}
            for r in runs]


def score(seed, method):
    """Range 0..2 scores about 0.6, range 100..102 about 0.8: a table that mixes them shows it in its means."""
    return (0.8 if seed >= 100 else 0.6) + 0.01 * (seed % 100) + (0.02 if method == "GA" else 0.0)


def test_a_report_counts_only_the_requested_seed_range(tiny_config, tmp_path, capsys):
    """The report is handed the runs and results of two ranges, 0..2 and 100..102, as if one folder held both;
    asked for --first-seed 100, its tables count seeds 100..102 alone: 3 seeds per arm, their mean, their
    paired differences; compare_runs.csv lists no other seed; and the CSV rows, the JSON, the printed table and
    the figure's title name the range."""
    old, new = (compare.plan_compare(compare_args(tiny_config, tmp_path, f))[1] for f in (0, 100))
    args = compare_args(tiny_config, tmp_path, 100)
    compare.report_compare(args, tmp_path / "compare", old + new, hand_made(old + new, score))
    t = tables(tmp_path, ["compare.csv", "compare_runs.csv", "compare_epochs.csv", "compare.json"])
    assert sorted({int(r["seed"]) for r in t["compare_runs.csv"]}) == [100, 101, 102]
    rows = {r["method"]: r for r in t["compare.csv"]}
    assert rows["fine-tuning"]["seeds"] == "3" and float(rows["fine-tuning"]["mean"]) == pytest.approx(0.81)
    assert float(rows["GA"]["diff_mean"]) == pytest.approx(0.02) and rows["GA"]["diff_n"] == "3"
    assert {r["seed_range"] for r in t["compare.csv"] + t["compare_epochs.csv"]} == {"seeds 100-102"}
    assert t["compare.json"]["seed_range"] == "seeds 100-102" and t["compare.json"]["regime"]["rte"]["n"] == 3
    assert "seeds 100-102, each one shared by every arm" in capsys.readouterr().out


def test_tables_only_over_a_folder_of_two_ranges(tiny_config, tmp_path, capsys, monkeypatch):
    """The same through the command line: finished runs of seeds 0..2 and 100..102 on disk in one --out;
    `compare --tables-only --first-seed 100` trains nothing and reads back the three runs per arm of its
    range alone (the runs of 0..2 are neither read nor missing); without --first-seed, the range 0..2."""
    for first in (0, 100):
        base, runs = compare.plan_compare(compare_args(tiny_config, tmp_path, first))
        for r, res in zip(runs, hand_made(runs, score)):
            (base / r.name).mkdir(parents=True)
            res["args"] = vars(sweep.train_args(base / r.name, r.argv))
            (base / r.name / "metrics.json").write_text(json.dumps(res))
    monkeypatch.setattr(train, "run", lambda args: pytest.fail(f"trained {args.out}"))
    flags = ["--task", "rte", "--methods", "ft,ga", "--seeds", "3", "--weights", str(tiny_config),
             "--out", str(tmp_path), "--data-dir", str(tmp_path / "no_data"), "--tables-only"]
    for first, seeds in (("100", [100, 101, 102]), ("0", [0, 1, 2])):
        experiments.main(["compare", "--first-seed", first] + flags)
        out = capsys.readouterr().out
        assert "not finished yet" not in out and f"seeds {seeds[0]}-{seeds[-1]}, each one shared" in out
        t = tables(tmp_path, ["compare_runs.csv", "compare.json"])
        assert sorted({int(r["seed"]) for r in t["compare_runs.csv"]}) == seeds and len(t["compare_runs.csv"]) == 6
        assert t["compare.json"]["seed_range"] == f"seeds {seeds[0]}-{seeds[-1]}"

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
    (["compare", "--first-seed", "-1"], "--first-seed"), (["seeds", "--first-seed", "x"], "--first-seed"),
    (["compare", "--first-seed", str(2**32 - 4), "--seeds", "5"], "--first-seed"),  # seed 2**32: past train.py's
    (["compare", "--first-seed", str(2**32 - 7)], "--first-seed"),  # the preset's 8 seeds: the last is 2**32
    (["grid", "--first-seed", "3"], "--first-seed"),  # grid runs one seed, --seed
    (["compare", "--ner-limit", "500"], "--ner-limit"), (["ner_pilot", "--ner-seeds", "4"], "--ner-seeds"),
    (["confirm", "--ner-limit", "0"], "--ner-limit"), (["confirm", "--task", "sst2"], "--task"),
    (["ner_pilot", "--methods", "ft"], "--methods"), (["confirm", "--scale", "gpu"], "--scale"),
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

"""
Tests for train.py as a user runs it, in subprocesses: data parallelism under torchrun gives the
one-process result, a run killed with SIGKILL resumes to the uninterrupted result byte for byte,
--resume refuses what it cannot continue, and --dtype bf16 trains.

Everything runs on a CPU in a few seconds per run: a tiny random BERT (2 layers, 32 wide) with the
default model's tokenizer, on a small synthetic RTE folder written here, so no test depends on GLUE.

    python -m pytest -q test_train.py
"""

import errno
import importlib.util
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from support import checkpoint
from support import metrics as metrics_py
import model
from support import settings
from support import state

HERE = Path(__file__).resolve().parent.parent  # the repository root
WORDS = ("the a cat dog sat ran on under mat park house big small red blue quickly slowly "
         "sees likes every some not never river tree old young man woman child bird").split()


def write_rte(folder, n_train, n_dev, seed=0):
    """A synthetic RTE: random word sentences, random labels, in GLUE's TSV format."""
    rng = random.Random(seed)
    (folder / "RTE").mkdir(parents=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            s1 = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
            s2 = " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
            rows.append(f"{i}\t{s1}\t{s2}\t{rng.choice(['entailment', 'not_entailment'])}")
        (folder / "RTE" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def write_weights(folder, dropout):
    """A tiny random BERT with the default model's vocabulary and tokenizer."""
    torch.manual_seed(0)
    cfg = model.Config(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=37, max_position_embeddings=64,
                       hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    checkpoint.save_pretrained(model.Model(cfg, 2), folder)
    shutil.copy(checkpoint.default_weights_dir() / "tokenizer.json", folder / "tokenizer.json")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    write_rte(root / "glue", n_train=21, n_dev=16)  # 21 = 8 + 8 + 5: the last batch splits 2/3 over two ranks
    write_rte(root / "glue_long", n_train=240, n_dev=16, seed=1)
    write_weights(root / "w0", dropout=0.0)
    write_weights(root / "w1", dropout=0.1)
    return root


def train(root, out, *flags, torchrun=0, weights="w0", glue="glue", check=True):
    """Run train.py in a subprocess (under torchrun with that many processes); returns the CompletedProcess."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"] \
        if torchrun else [sys.executable]
    cmd = launcher + [str(HERE / "train.py"), "--task", "rte", "--weights", str(root / weights),
                      "--data-dir", str(root / glue), "--out", str(out), "--max-len", "24", "--batch-size", "8",
                      "--threads", "1", "--log-interval", "1", *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def metrics(out):
    return json.loads((Path(out) / "metrics.json").read_text())


def final_weights(out):
    return torch.load(Path(out) / "train_state.pt", weights_only=False)["model"]

# -----------------------------------------------------------------------------
# torchrun

@pytest.fixture(scope="module")
def one_and_two(setup):
    """The same 2-epoch run (epoch 1 plain, epoch 2 AD-DROP with q = 1, so the masks are
    deterministic) in one process and in two under torchrun. Dropout is 0 in these weights."""
    flags = ["--epochs", "2", "--p", "0.5", "--q", "1.0", "--lr", "1e-3"]
    train(setup, setup / "one", *flags)
    train(setup, setup / "two", *flags, torchrun=2)
    return setup / "one", setup / "two"


@pytest.mark.slow
def test_two_ranks_equal_one_process(one_and_two):
    """Two ranks, each with its share of every global batch, must follow the one-process run: the
    loss of each rank is its part of the global batch mean, and DDP averages the ranks' gradients,
    so the gradient of every step is the one-process gradient up to float rounding. Per-step
    losses (the plain epoch and the AD-DROP epoch), dev metrics and final weights agree to 1e-5."""
    one, two = (metrics(o) for o in one_and_two)
    assert two["world_size"] == 2 and one["world_size"] == 1
    assert [h["kind"] for h in one["history"]] == [h["kind"] for h in two["history"]] == ["plain", "AD-DROP"]
    for h1, h2 in zip(one["history"], two["history"]):
        assert len(h1["step_losses"]) == len(h2["step_losses"]) == 3
        assert max(abs(a - b) for a, b in zip(h1["step_losses"], h2["step_losses"])) < 1e-5
        assert abs(h1["dev_loss"] - h2["dev_loss"]) < 1e-5 and h1["metric"] == h2["metric"]
    assert abs(one["history"][1]["dropped"] - two["history"][1]["dropped"]) < 0.05  # per-rank mean of fractions
    w1, w2 = (final_weights(o) for o in one_and_two)
    start = load_file(str(one_and_two[0].parent / "w0" / "model.safetensors"))
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-5
    moved = (w1["head.out.weight"] - start["classifier.weight"]).abs().max().item()
    assert moved > 1e-3  # the runs did train: the comparison means something


@pytest.mark.slow
def test_torchrun_resume_continues_the_run(setup, one_and_two):
    """Under torchrun, --resume works as in one process: one epoch, then --resume with --epochs 2,
    gives the two-epoch run's weights."""
    out = setup / "two_resumed"
    flags = ["--p", "0.5", "--q", "1.0", "--lr", "1e-3"]
    train(setup, out, "--epochs", "1", *flags, torchrun=2)
    r = train(setup, out, "--epochs", "2", "--resume", *flags, torchrun=2)
    assert "resuming after epoch 1" in r.stdout
    w, ref = final_weights(out), final_weights(one_and_two[1])
    assert all(torch.equal(w[k], ref[k]) for k in ref)
    assert [h["step_losses"] for h in metrics(out)["history"]] == [h["step_losses"] for h in metrics(one_and_two[1])["history"]]

# -----------------------------------------------------------------------------
# --resume

LONG = ["--epochs", "4", "--p", "0.5", "--q", "0.5", "--patience", "10"]  # 30 steps an epoch on glue_long
LONG_KW = dict(weights="w1", glue="glue_long")  # dropout on, and q = 0.5 draws random masks


@pytest.fixture(scope="module")
def uninterrupted(setup):
    """The 4-epoch run that the stopped-and-resumed runs below must equal."""
    train(setup, setup / "uninterrupted", *LONG, **LONG_KW)
    return setup / "uninterrupted"


def start(setup, out, *flags, torchrun=0, weights="w1", glue="glue_long"):
    """train.py (under torchrun with that many processes) as a Popen whose stdout is read line by line."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"] \
        if torchrun else [sys.executable]
    cmd = launcher + [str(HERE / "train.py"), "--task", "rte", "--weights", str(setup / weights),
                      "--data-dir", str(setup / glue), "--out", str(out), "--max-len", "24", "--batch-size", "8",
                      "--threads", "1", "--log-interval", "1", *flags]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def signal_at(proc, step, sig):
    """Send sig to proc when it prints `step STEP/` (epoch 3 runs steps 61-90), as a scheduler would."""
    for line in proc.stdout:
        if line.startswith(f"step {step}/"):
            proc.send_signal(sig)
            break
    out, err = proc.communicate(timeout=120)
    return out, err


def assert_same_run(out, ref):
    """Every epoch's record (but its wall time), the best epoch and the checkpoint files, byte for byte."""
    got, want = metrics(out), metrics(ref)
    strip = lambda hs: [{k: v for k, v in h.items() if k != "seconds"} for h in hs]
    assert strip(got["history"]) == strip(want["history"])
    assert (got["best_epoch"], got["best_metric"]) == (want["best_epoch"], want["best_metric"])
    for f in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (out / f).read_bytes() == (ref / f).read_bytes(), f
    w, w_ref = final_weights(out), final_weights(ref)
    assert all(torch.equal(w[k], w_ref[k]) for k in w_ref)


@pytest.mark.slow
def test_killed_run_resumes_byte_for_byte(setup, uninterrupted):
    """A run killed with SIGKILL in the middle of epoch 3 and resumed ends exactly like the run that
    was never interrupted: the same per-epoch metrics and the same best checkpoint, byte for byte.
    That needs the state of every epoch end: weights, AdamW's moments, the step, the best metric
    and its epoch, and the random streams (dropout is on here, and q = 0.5 draws random masks)."""
    out = setup / "killed"
    proc = start(setup, out, *LONG)
    signal_at(proc, 64, signal.SIGKILL)  # epoch 3's fourth step
    assert proc.returncode == -signal.SIGKILL
    assert [h["epoch"] for h in metrics(out)["history"]] == [1, 2]  # killed inside epoch 3
    r = train(setup, out, *LONG, "--epochs", "1", "--resume", check=False, **LONG_KW)  # may grow, not shrink
    assert r.returncode == 1 and "is the state after epoch 2, past --epochs 1: pass --epochs 2 or more" in r.stderr
    r = train(setup, out, *LONG, "--resume", **LONG_KW)
    assert "resuming after epoch 2" in r.stdout
    assert_same_run(out, uninterrupted)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_saves_inside_the_epoch_and_resumes_bit_for_bit(setup, uninterrupted, sig):
    """SIGTERM or SIGUSR1 (what Slurm sends before it preempts or times out a job) in the middle of an AD-DROP
    epoch: the step in progress finishes, the state is saved with how far the epoch got, the lock is released,
    the exit code is 75 with one line on how to resume. --resume then runs the batches left with the same random
    streams and the same partial sums, so the run ends bit for bit like the uninterrupted one."""
    out = setup / f"stopped_{sig.name}"
    proc = start(setup, out, *LONG)
    _, err = signal_at(proc, 34, sig)  # epoch 2 (AD-DROP) runs steps 31-60
    assert proc.returncode == 75, err[-2000:]
    assert "Traceback" not in err and f"stopped by {sig.name} after step " in err and "--resume" in err
    assert not (out / "run.lock").exists()
    saved = torch.load(out / "train_state.pt", weights_only=False)
    part = saved["in_epoch"]
    assert part["epoch"] == 2 and 4 <= part["batches"] < 30 and saved["step"] == 30 + part["batches"]
    assert len(saved["ranks"][0]["losses"]) == part["batches"]
    r = train(setup, out, *LONG, "--epochs", "1", "--resume", check=False, **LONG_KW)  # --epochs may grow, not shrink
    assert r.returncode == 1 and "stopped inside epoch 2, past --epochs 1: pass --epochs 2 or more" in r.stderr
    r = train(setup, out, *LONG, "--resume", **LONG_KW)
    assert f"resuming after batch {part['batches']} of epoch 2" in r.stdout
    assert_same_run(out, uninterrupted)


@pytest.mark.slow
def test_save_every_limits_what_a_kill_loses(setup, uninterrupted):
    """--save-every 7 writes the state every 7 steps, inside epochs too: a SIGKILL at step 66 leaves the state
    of step 63 (epoch 3, batch 3), and --resume (without --save-every: it changes nothing that is trained)
    continues from there to the uninterrupted run's end, bit for bit."""
    out = setup / "save_every"
    proc = start(setup, out, *LONG, "--save-every", "7")
    signal_at(proc, 66, signal.SIGKILL)
    saved = torch.load(out / "train_state.pt", weights_only=False)
    assert saved["step"] == 63 and saved["in_epoch"]["epoch"] == 3 and saved["in_epoch"]["batches"] == 3
    r = train(setup, out, *LONG, "--resume", **LONG_KW)
    assert "resuming after batch 3 of epoch 3 (step 63)" in r.stdout
    assert_same_run(out, uninterrupted)


@pytest.mark.slow
def test_save_every_minutes_saves_inside_the_epoch(setup, tmp_path):
    """--save-every in minutes ('0.0001m', 6 ms: every step here) saves by the clock: a SIGKILL in the middle of
    epoch 2 leaves a state inside epoch 2, one step or so behind the kill."""
    out = tmp_path / "minutes"
    proc = start(setup, out, *LONG, "--save-every", "0.0001m")
    signal_at(proc, 40, signal.SIGKILL)
    saved = torch.load(out / "train_state.pt", weights_only=False)
    assert saved["in_epoch"]["epoch"] == 2 and 38 <= saved["step"] <= 41


@pytest.mark.slow
def test_torchrun_stops_every_rank_at_one_step_and_resumes(setup):
    """SIGTERM to torchrun, which hands it to its workers, each at its own moment: the ranks agree (a max over
    ranks after every step) and stop after the same step; only rank 0 writes the state, which holds every rank's
    random streams and partial sums. Resumed under torchrun, the run ends bit for bit like the uninterrupted
    two-process run."""
    flags = ["--epochs", "2", "--p", "0.5", "--q", "0.5"]
    ref = setup / "two_long"
    train(setup, ref, *flags, torchrun=2, **LONG_KW)
    out = setup / "two_stopped"
    proc = start(setup, out, *flags, torchrun=2)
    _, err = signal_at(proc, 40, signal.SIGTERM)
    assert proc.returncode != 0 and "stopped by" in err, err[-3000:]
    saved = torch.load(out / "train_state.pt", weights_only=False)
    assert saved["in_epoch"]["epoch"] == 2 and len(saved["ranks"]) == 2 and not (out / "run.lock").exists()
    assert all(len(r["losses"]) == saved["in_epoch"]["batches"] for r in saved["ranks"])
    r = train(setup, out, *flags, "--resume", torchrun=2, **LONG_KW)
    assert "resuming after batch" in r.stdout
    assert_same_run(out, ref)


@pytest.mark.slow
def test_a_state_from_elsewhere_is_refused(setup, uninterrupted, tmp_path):
    """A mid-epoch state resumed with other settings, or whose epoch in progress stopped past the end of the
    epoch (30 batches here): one line naming the problem, no traceback."""
    out = tmp_path / "run"
    proc = start(setup, out, *LONG, "--save-every", "5")
    signal_at(proc, 37, signal.SIGTERM)
    r = train(setup, out, *LONG, "--lr", "1e-3", "--resume", check=False, **LONG_KW)
    assert r.returncode == 1 and "other settings" in r.stderr and "--lr" in r.stderr and "Traceback" not in r.stderr
    saved = torch.load(out / "train_state.pt", weights_only=False)
    saved["in_epoch"]["batches"] = 31
    torch.save(saved, out / "train_state.pt")
    r = train(setup, out, *LONG, "--resume", check=False, **LONG_KW)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "stopped at batch 31, past the end of the epoch (30 batches)" in r.stderr


@pytest.mark.slow
def test_resume_refuses_what_it_cannot_continue(setup, one_and_two):
    """--resume with nothing to resume, with other settings, or after the run finished: one line
    that names the problem, a non-zero exit, no traceback."""
    r = train(setup, setup / "empty", "--resume", check=False)
    assert r.returncode != 0 and "nothing to resume" in r.stderr and "Traceback" not in r.stderr
    r = train(setup, one_and_two[0], "--epochs", "3", "--p", "0.5", "--q", "1.0", "--lr", "3e-5", "--resume", check=False)
    assert r.returncode != 0 and "other settings" in r.stderr and "--lr" in r.stderr and "Traceback" not in r.stderr
    r = train(setup, one_and_two[0], "--epochs", "2", "--p", "0.5", "--q", "1.0", "--lr", "1e-3", "--resume", check=False)
    assert r.returncode != 0 and "already finished" in r.stderr and "Traceback" not in r.stderr
    (setup / "broken").mkdir()
    (setup / "broken" / "train_state.pt").write_bytes(b"not a state")
    r = train(setup, setup / "broken", "--resume", check=False)
    assert r.returncode != 0 and "is not a training state" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_ctrl_c_says_how_to_resume(setup):
    """Ctrl-C (SIGINT) after an epoch has finished prints where the state is and the exact command
    that resumes the run, and exits 130 (128 + SIGINT, as a shell reports it). The child starts with SIGINT at its default, as a terminal's foreground job
    does: under `bash -c '... &'` a test run inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt (the run finished, exit 0)."""
    out = setup / "interrupted"
    cmd = [sys.executable, str(HERE / "train.py"), "--task", "rte", "--weights", str(setup / "w0"),
           "--data-dir", str(setup / "glue_long"), "--out", str(out), "--max-len", "24", "--batch-size", "8",
           "--threads", "1", "--log-interval", "1", "--epochs", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stdout:
        if line.startswith("epoch 1 "):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err  # the shell's code for SIGINT, not 1 (an error)
    assert str(out / "train_state.pt") in err and "--resume" in err and "--epochs 3" in err

# -----------------------------------------------------------------------------
# bf16

@pytest.mark.slow
def test_bf16_trains(setup):
    """--dtype bf16 runs the forwards and backwards under autocast: a plain and an AD-DROP epoch
    finish with finite losses, and the weights (float32) move."""
    out = setup / "bf16"
    train(setup, out, "--epochs", "2", "--p", "0.5", "--q", "0.5", "--dtype", "bf16", weights="w1")
    res = metrics(out)
    assert [h["kind"] for h in res["history"]] == ["plain", "AD-DROP"]
    assert all(torch.isfinite(torch.tensor(h["step_losses"])).all() for h in res["history"])
    assert res["history"][1]["dropped"] > 0
    w = final_weights(out)["head.out.weight"]
    assert w.dtype == torch.float32
    moved = (w - load_file(str(setup / "w1" / "model.safetensors"))["classifier.weight"]).abs().max().item()
    # AdamW moves a weight with a gradient by about lr a step (weight decay alone: lr x 0.01 x |w|, far less), so
    # a bf16 step whose gradients never reached the weights fails here
    assert moved > 0.5 * res["lr"], (moved, res["lr"])

# -----------------------------------------------------------------------------
# --holdout

@pytest.mark.parametrize("model_type", ["bert", "roberta", "electra"])
def test_attention_maps_are_float32_under_bf16_autocast(model_type):
    """Under --dtype bf16 (autocast) the maps A, and so B = dF/dA and Eq. 6's comparisons, are float32 for every
    model type, as train.py's "Precision" says: the float32 padding mask promotes the bf16 scores. The residual
    stream is float32 too: CUDA's autocast runs LayerNorm in float32 and a CPU's does not, so ELECTRA's
    embedding projection is cast back to float32, or on a CPU its whole stream would run in bf16 (on a GPU
    not). A model cast to bfloat16 whole (from_pretrained's dtype)
    runs in bfloat16 throughout: a float32 mask there would meet bfloat16 values in A @ v and fail."""
    extra = {"electra": dict(embedding_size=16), "roberta": dict(pad_token_id=1)}.get(model_type, {})
    cfg = model.Config(model_type=model_type, vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64, **extra)
    net = model.Model(cfg, num_labels=2).eval()
    ids = torch.randint(3, 40, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 5:] = 0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, attns = net(ids, mask, torch.zeros_like(ids))
        hidden, _ = net.encoder(ids, mask, torch.zeros_like(ids))
    assert [a.dtype for a in attns] == [torch.float32] * 2
    assert hidden.dtype == torch.float32  # the residual stream too (ELECTRA's projection is cast back), as on a GPU
    _, attns = net.to(torch.bfloat16)(ids, mask, torch.zeros_like(ids))  # a model cast whole runs in its dtype
    assert [a.dtype for a in attns] == [torch.bfloat16] * 2


def test_holdout_split_is_stratified_and_seeded():
    """--holdout F sets aside round(F * n_c) examples of each class c (each score quintile for
    regression): the two parts are a disjoint cover of the training set, class shares stay as they
    were, and the same seed gives the same split."""
    import data
    ex = [data.Example(f"s{i}", None, int(i % 10 < 3)) for i in range(200)]  # 60 of class 1, 140 of class 0
    train_part, hold = data.holdout_split(ex, 0.1, seed=0)
    assert sorted(train_part + hold) == sorted(ex) and not set(train_part) & set(hold)
    assert sum(e.label for e in hold) == 6 and len(hold) == 20
    assert data.holdout_split(ex, 0.1, seed=0) == (train_part, hold) != data.holdout_split(ex, 0.1, seed=1)
    scores = [data.Example(f"s{i}", "t", float(i % 50) / 10) for i in range(100)]  # STS-B-like scores 0..4.9
    _, hold = data.holdout_split(scores, 0.2, seed=0)
    quintile = sorted(e.label for e in scores)[::20]  # lowest score of each quintile
    assert [sum(q <= e.label < q + 1 for e in hold) for q in quintile] == [4] * 5
    with pytest.raises(data.DataError, match="--holdout 0.001: leaves 0 of 200"):
        data.holdout_split(ex, 0.001, seed=0)


@pytest.mark.slow
def test_resume_after_the_last_epoch_only_finishes(setup, tmp_path):
    """A run stopped after its last epoch's state was written but before metrics.json said
    "finished" has nothing left to train: --resume only writes the final metrics.json (a sweep
    that resumes every unfinished run must not be stuck on it)."""
    out = tmp_path / "run"
    train(setup, out, "--epochs", "1", "--no-checkpoint")
    state = torch.load(out / "train_state.pt", weights_only=False) if (out / "train_state.pt").exists() else None
    assert state is None  # --no-checkpoint removes the state of a finished run
    train(setup, out, "--epochs", "1")
    m = metrics(out)
    m["finished"] = False
    (out / "metrics.json").write_text(json.dumps(m))
    r = train(setup, out, "--epochs", "1", "--resume")
    assert metrics(out)["finished"] and metrics(out)["history"] == m["history"] and "best dev" in r.stdout


@pytest.mark.slow
def test_a_checkpoint_of_another_task_is_said_so(setup, tmp_path):
    """--weights OUT of a run fine-tuned on another task (its config.json names it) starts from that task's
    classifier and Table 4's row for its model type: the run says both before it trains; a checkpoint of the
    same task, or weights that are no checkpoint of ours, say nothing."""
    out = tmp_path / "rte"
    train(setup, out, "--epochs", "1")
    assert checkpoint.fine_tuned_on(out) == "rte" and checkpoint.fine_tuned_on(setup / "w0") is None
    r = train(setup, tmp_path / "again", "--epochs", "1", weights=out)
    assert "note:" not in r.stdout
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, "task": "sst2"}))
    r = train(setup, tmp_path / "other", "--epochs", "1", weights=out)
    assert f"note: {out} was fine-tuned on sst2: this rte run starts from its weights (its classifier too, where " \
           "it fits), and the defaults are settings.py's for a --weights model (pass --lr to choose)" in r.stdout


@pytest.mark.slow
def test_a_run_without_resume_never_overwrites_an_unfinished_one(setup, tmp_path):
    """The resume command without its --resume (a command rerun from the shell's history) into a folder whose
    run did not finish is refused in one line, naming the state and both ways on, and the state is left as it
    was. Into a folder whose run finished, the same settings make the run again, said in a note; other
    settings are refused, naming the difference, and the finished run's files are left as they were. A state
    saved after a finished run's metrics.json is a later run's, unfinished: refused too."""
    out = tmp_path / "run"
    train(setup, out, "--epochs", "1")
    r = train(setup, out, "--epochs", "1")  # finished, these settings: made again
    assert "epoch 1 (plain)" in r.stdout and f"note: {out} holds a finished run of these settings" in r.stdout
    files = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    r = train(setup, out, "--epochs", "1", "--p", "0.5", "--q", "0.5", check=False)  # another experiment
    assert r.returncode == 1 and "epoch 1 (" not in r.stdout, r.stdout
    assert f"error: {out} holds a finished run made with other settings (--p 0.0 then, 0.5 now; --q 0.0 then, " \
           f"0.5 now): pass another --out to keep both, or remove {out} to replace it" in r.stderr, r.stderr
    assert {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()} == files
    m = metrics(out)
    m["finished"] = False  # as if stopped after its state and before its final metrics.json
    (out / "metrics.json").write_text(json.dumps(m))
    before = (out / "train_state.pt").read_bytes()
    r = train(setup, out, "--epochs", "1", check=False)
    assert r.returncode == 1 and "epoch 1" not in r.stdout, r.stdout
    assert f"error: {out} holds a run that did not finish (its state, {out / 'train_state.pt'}): add --resume" \
        in r.stderr, r.stderr
    assert (out / "train_state.pt").read_bytes() == before
    # a finished run's metrics.json beside a state saved after it: a new run's, stopped inside its first epoch
    m["finished"] = True
    (out / "metrics.json").write_text(json.dumps(m))
    later = (out / "metrics.json").stat().st_mtime_ns + 10**9
    os.utime(out / "train_state.pt", ns=(later, later))
    r = train(setup, out, "--epochs", "1", check=False)
    assert r.returncode == 1 and "holds a run that did not finish" in r.stderr, r.stderr


@pytest.mark.slow
def test_resume_with_predict_takes_the_best_weights_from_the_state_or_refuses_at_once(setup, tmp_path):
    """--predict added on --resume to a run started without it (so no best-epoch weights were kept): when the
    state's own weights are the best epoch's (it was saved at the end of that epoch), they are kept from the
    state and the run finishes with predictions; when the best epoch came earlier, the resume is refused at
    once, naming the state file, before any epoch trains (not after every remaining epoch)."""
    glue = tmp_path / "glue"
    shutil.copytree(setup / "glue", glue)
    rows = (glue / "RTE" / "dev.tsv").read_text().splitlines()
    (glue / "RTE" / "test.tsv").write_text("\n".join(r.rsplit("\t", 1)[0] for r in rows) + "\n")  # no labels
    out = tmp_path / "run"
    train(setup, out, "--epochs", "2", "--q", "0", glue=glue)
    state = torch.load(out / "train_state.pt", weights_only=False)
    assert state["epoch"] == 2 and state["best_weights"] is None
    for best, refused in ((1, True), (2, False)):
        state["best_epoch"] = best
        torch.save(state, out / "train_state.pt")
        r = train(setup, out, "--epochs", "3", "--q", "0", "--predict", "--resume", glue=glue, check=False)
        if refused:
            assert r.returncode == 1 and "holds no best-epoch weights" in r.stderr and "its best epoch, 1, came before its last, 2" in r.stderr, r.stderr
            assert str(out / "train_state.pt") in r.stderr and "step " not in r.stdout, r.stdout
        else:
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
            assert (out / "RTE.tsv").read_text().count("\n") == len(rows), "one prediction a test row, and a header"
            assert metrics(out)["finished"]


@pytest.mark.slow
def test_holdout_picks_the_epoch_and_dev_is_only_reported(setup, tmp_path):
    """With --holdout the best epoch is the one with the best holdout metric, whatever dev says; the dev
    metric is only reported at that epoch (dev_at_best), and the holdout is not trained on. The task makes
    the two disagree: the label is whether "cat" is in the first sentence, and dev's labels are the
    opposite, so as the model learns, holdout accuracy rises and dev accuracy falls."""
    rng = random.Random(0)
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    for split, n, flip in (("train", 240, False), ("dev", 64, True)):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            cat = rng.random() < 0.5
            words = rng.choices([w for w in WORDS if w != "cat"], k=rng.randint(4, 10))
            if cat:
                words.insert(rng.randrange(len(words)), "cat")
            rows.append(f"{i}\t{' '.join(words)}\tthe dog\t{'entailment' if cat != flip else 'not_entailment'}")
        (tmp_path / "glue" / "RTE" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    shutil.copytree(setup / "w0", tmp_path / "w0")
    out = tmp_path / "holdout"
    r = train(tmp_path, out, "--epochs", "4", "--holdout", "0.25", "--lr", "3e-3", "--no-checkpoint")
    m = metrics(out)
    hist = m["history"]
    holdout, dev = [h["holdout_metric"] for h in hist], [h["metric"] for h in hist]
    assert holdout[-1] > 0.9 and dev[-1] < 0.1  # it learned the rule, and dev says the opposite
    best = holdout.index(max(holdout)) + 1  # the first best epoch, as the run keeps the first
    assert m["selection"] == "holdout" and m["best_epoch"] == best != dev.index(max(dev)) + 1
    assert m["best_metric"] == max(holdout) and m["dev_at_best"] == dev[best - 1]
    assert "180 train / 60 holdout / 64 dev examples" in r.stdout  # 240 examples, a quarter held out
    assert len(hist[0]["step_losses"]) == 23  # ceil(180 / 8) steps: the holdout is not trained on
    prov = m["provenance"]  # the same seed on another CPU or torch build is another draw: say what ran it
    assert prov["torch"] == torch.__version__ and prov["threads"] == 1 and prov["processes"] == 1 and prov["cpu"]
    assert prov["commit"] is None or len(prov["commit"].removesuffix("-dirty")) == 40


@pytest.mark.slow
def test_few_shot_run_holds_out_k_per_class_breaks_ties_by_loss_and_scores_dev_once(setup, tmp_path):
    """The few-shot study's run: --shots 8 --shots-holdout trains on 8 per class and picks the epoch on 8 others
    per class; --tie-break loss picks, among the epochs of the best held-out accuracy, the one of lowest held-out
    loss; --dev-once scores dev only at the end, with that epoch's weights: the same number (to 1e-9) as the
    same run scoring dev every epoch gives at that epoch, since scoring draws no random numbers.
    --no-epoch-state writes no training state after the epochs."""
    flags = ["--shots", "8", "--shots-holdout", "--tie-break", "loss", "--epochs", "12", "--patience", "12",
             "--lr", "1e-3"]
    once, every = tmp_path / "once", tmp_path / "every"
    r = train(setup, once, *flags, "--dev-once", "--no-epoch-state", glue="glue_long")
    train(setup, every, *flags, "--no-checkpoint", glue="glue_long")
    assert "16 train / 16 holdout / 16 dev examples" in r.stdout and "dev loss" not in r.stdout.split("best")[0]
    assert not (once / "train_state.pt").exists() and (once / "model.safetensors").is_file()
    m, ref = metrics(once), metrics(every)
    hist = m["history"]
    assert [h["holdout_metric"] for h in hist] == [h["holdout_metric"] for h in ref["history"]]
    assert all(math.isnan(h["dev_loss"]) and "metric" not in h for h in hist)
    top = max(h["holdout_metric"] for h in hist)
    tied = [h for h in hist if h["holdout_metric"] == top]
    assert m["best_epoch"] == min(tied, key=lambda h: (h["holdout_loss"], h["epoch"]))["epoch"]
    assert m["best_epoch"] == ref["best_epoch"]
    assert abs(m["dev_at_best"] - ref["history"][m["best_epoch"] - 1]["metric"]) < 1e-9
    assert m["dev_once"]["metric"] == m["dev_at_best"] and math.isfinite(m["dev_once"]["loss"])


@pytest.mark.slow
def test_impl_trains_with_the_given_file(setup, tmp_path):
    """train.py --impl FILE trains with FILE's function in place of the real one (impl.py): an exercise file whose
    is_addrop_epoch always says no makes every epoch of an AD-DROP run plain, and the run names the file it used.
    A file that is no exercise file (a copy of addrop.py, say) is refused in one line naming it."""
    student = tmp_path / "student" / "07_is_addrop_epoch.py"
    student.parent.mkdir()
    student.write_text("def is_addrop_epoch(epoch, cross_tuning=True):\n    return False\n")
    r = train(setup, tmp_path / "out", "--epochs", "2", "--p", "0.5", "--q", "0.5", "--no-checkpoint",
              "--impl", str(student))
    assert f"--impl: is_addrop_epoch from {student}" in r.stdout
    assert [h["kind"] for h in metrics(tmp_path / "out")["history"]] == ["plain", "plain"]
    wrong = tmp_path / "addrop.py"
    wrong.write_text((HERE / "addrop.py").read_text())
    r = train(setup, tmp_path / "out2", "--epochs", "1", "--impl", str(wrong), check=False)
    assert r.returncode == 1 and f"--impl {wrong}: not an exercise file" in r.stderr
    assert "Traceback" not in r.stderr
    # a threshold that returns a wrong shape fails inside the real code (drop_mask): the message names the
    # exercise and the lessons' command, no traceback, and the failed run leaves no folder behind
    student = tmp_path / "student" / "05_threshold.py"
    student.write_text("def threshold(scores, real, p):\n    return scores[..., :2]\n")
    r = train(setup, tmp_path / "out3", "--epochs", "1", "--p", "0.5", "--q", "0.5", "--no-cross-tuning", "--impl",
              str(student), check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"error: --impl {student}: training failed with RuntimeError: " in r.stderr
    assert "If it is your exercise 5 (threshold), handing on a wrong shape" in r.stderr
    assert f"python -m pytest test_addrop.py --impl {student}" in r.stderr
    assert not (tmp_path / "out3").exists()


@pytest.mark.parametrize("text, says", [
    ("", "defines no function is_addrop_epoch"),
    ("def is_addrop_epoch(epoch):\n    return True\n", "expected is_addrop_epoch(epoch, cross_tuning=True)"),
    ("IGNORE = 0\n\n\ndef is_addrop_epoch(epoch, cross_tuning=True):\n    return True\n",
     "defines IGNORE, which addrop.py has already"),
    ("def is_addrop_epoch(epoch, cross_tuning=True):\n    return epoch %% 2\n", "does not parse"),
])
def test_impl_refuses_a_file_that_cannot_stand_in(text, says, tmp_path):
    """train.py --impl FILE with an exercise file that cannot stand in for its function (no such function, another
    signature, a name of the real module redefined, an answer that does not parse) stops before training, in a
    message that names the file and what is wrong. No frame of the project's code: the student's file is what to
    fix."""
    path = tmp_path / "07_is_addrop_epoch.py"
    path.write_text(text)
    r = subprocess.run([sys.executable, str(HERE / "train.py"), "--task", "rte", "--impl", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and f"--impl {path}" in r.stderr and says in r.stderr, r.stderr
    assert str(HERE) not in r.stderr, r.stderr  # no frame of the project's code


def test_provenance_records_the_commit_the_process_imported(tmp_path):
    """A sweep outlives commits: its process keeps running the code it imported, so the commit its runs
    record is read once, at import, not from HEAD when each run starts. Checked on settings.py copied into a
    throwaway repository: after a new commit there, provenance still names the first one, while a fresh read
    names the new one, and an uncommitted change to a tracked file reads as -dirty."""
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                    capture_output=True, text=True, check=True).stdout.strip()
    shutil.copy(Path(settings.__file__), tmp_path / "settings.py")
    git("init", "-q")
    git("add", "settings.py")
    git("commit", "-q", "-m", "first")
    first = git("rev-parse", "HEAD")
    spec = importlib.util.spec_from_file_location("settings_in_tmp", tmp_path / "settings.py")
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    assert copy.COMMIT == first
    (tmp_path / "settings.py").write_text((tmp_path / "settings.py").read_text() + "# changed\n")
    assert copy.code_commit() == first + "-dirty"
    git("commit", "-q", "-am", "second")
    second = git("rev-parse", "HEAD")
    assert second != first and copy.code_commit() == second
    assert copy.provenance(torch.device("cpu"), 1)["commit"] == first


def test_fair_share_waits_by_the_load_unless_the_user_chose(monkeypatch):
    """cpu.fair_share() gives OpenMP a short spin (GOMP_SPINCOUNT=cpu.SPINCOUNT) on an idle machine, and
    passive waiting when other programs keep more than cpu.BUSY of its CPUs busy, so that waiting threads never
    spin against them; a user's own choice wins: their GOMP_SPINCOUNT stays, and with their OMP_WAIT_POLICY no
    spin count is added (libgomp would let it overrule the policy). Once torch is loaded it changes nothing:
    OpenMP has read its settings, and the environment must keep saying what they are."""
    from support import cpu
    monkeypatch.delitem(sys.modules, "torch")  # as before the first import of torch; restored after the test
    monkeypatch.setattr(cpu, "busy_at_start", cpu.busy_at_start)
    monkeypatch.setattr(cpu, "others_busy", lambda: None)  # busy=None measures: here it finds no /proc/stat
    for busy, want in ((0.0, {"GOMP_SPINCOUNT": cpu.SPINCOUNT}), (cpu.BUSY, {"GOMP_SPINCOUNT": cpu.SPINCOUNT}),
                       (cpu.BUSY + 0.01, {"OMP_WAIT_POLICY": "PASSIVE"}), (None, {"GOMP_SPINCOUNT": cpu.SPINCOUNT})):
        env = {}
        assert cpu.fair_share(env, busy=busy) == {**dict.fromkeys(cpu.KEYS), **want} and env == want, busy
        assert cpu.busy_at_start == busy
    env = {"GOMP_SPINCOUNT": "300000"}
    assert cpu.fair_share(env, busy=2.0)["GOMP_SPINCOUNT"] == "300000" and env == {"GOMP_SPINCOUNT": "300000"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert cpu.fair_share(env, busy=0.0) == {"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": "ACTIVE",
                                             "GOMP_SPINCOUNT": None}
    monkeypatch.setitem(sys.modules, "torch", torch)
    env = {}
    assert cpu.fair_share(env, busy=0.0)["GOMP_SPINCOUNT"] is None and env == {}


def test_others_busy_reads_the_load_of_this_process_cpus(tmp_path, monkeypatch):
    """cpu.others_busy() counts the CPUs other programs kept busy between two readings of /proc/stat, only
    over the CPUs this process may use: here two fake readings, CPU 0 busy 30 of 40 ticks and CPU 1 idle
    (10 of 40), make 2 * 40 / 80 = 1.0 CPU; a CPU outside the affinity (cpu7), idle columns (idle, iowait) and
    the summary line do not count. No /proc/stat (not Linux): None."""
    from support import cpu
    readings = iter([
        "cpu  100 0 100 900 0 0 0 0 0 0\ncpu0 10 0 10 100 0 0 0 0 0 0\ncpu1 10 0 10 100 0 0 0 0 0 0\n"
        "cpu7 0 0 0 100 0 0 0 0 0 0\nintr 5\n",
        "cpu  900 0 900 900 0 0 0 0 0 0\ncpu0 35 0 15 105 5 0 0 0 0 0\ncpu1 15 0 15 130 0 0 0 0 0 0\n"
        "cpu7 40 0 0 100 0 0 0 0 0 0\nintr 9\n"])
    stat = tmp_path / "stat"
    monkeypatch.setattr(cpu.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(cpu.time, "sleep", lambda s: stat.write_text(next(readings)))
    stat.write_text(next(readings))
    assert cpu.others_busy(stat=stat) == 1.0
    assert cpu.others_busy(stat=tmp_path / "missing") is None


@pytest.mark.slow
def test_a_run_records_its_threads_and_openmp_settings(setup, tmp_path):
    """metrics.json says what a run chose: with no OpenMP setting in its environment, train.py measures the
    load, sets the short spin or passive waiting by it before torch loads, and keeps torch's threads (one per
    CPU it may use); a user's OMP_WAIT_POLICY is kept, with no spin count beside it and no load measured, and
    --threads N overrides the thread count. The two runs are real
    train.py processes, so the record is what OpenMP was started with."""
    from support import cpu
    clean = {k: v for k, v in os.environ.items() if k not in cpu.KEYS}
    cmd = [sys.executable, str(HERE / "train.py"), "--task", "rte", "--weights", str(setup / "w0"), "--data-dir",
           str(setup / "glue"), "--max-len", "24", "--epochs", "1", "--no-checkpoint"]
    runs = [subprocess.Popen(cmd + ["--out", str(tmp_path / "default")], env=clean, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True),
            subprocess.Popen(cmd + ["--out", str(tmp_path / "mine"), "--threads", "1"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**clean, "OMP_WAIT_POLICY": "passive"})]
    for r in runs:
        out, err = r.communicate(timeout=300)
        assert r.returncode == 0, out[-2000:] + err[-3000:]
    default, mine = (metrics(tmp_path / name)["provenance"] for name in ("default", "mine"))
    assert default["threads"] == len(os.sched_getaffinity(0))
    busy = default["cpus_busy_at_start"]  # the other run was starting beside it: either choice may be right
    assert 0 <= busy <= len(os.sched_getaffinity(0)) + 0.01, busy
    assert default["openmp"] == ({"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": None}
                                 if busy > cpu.BUSY else
                                 {"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": cpu.SPINCOUNT})
    assert mine["threads"] == 1
    assert mine["openmp"] == {"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": None}
    assert mine["cpus_busy_at_start"] is None  # the user chose: nothing measured


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "fp16"], "--dtype 'fp16': choose fp32 or bf16"),
    (["--holdout", "1.5"], "--holdout 1.5: must be a fraction strictly between 0 and 1"),
    (["--holdout", "0"], "--holdout 0.0: must be a fraction strictly between 0 and 1"),
    (["--seed", "-1"], "--seed -1: must be in [0, 2**32)"),
    (["--lr", "inf"], "--lr inf: must be a positive number"),
    (["--weight-decay", "nan"], "--weight-decay nan: must be a number at least 0"),
    (["--warmup", "2"], "--warmup 2.0: must be a fraction in [0, 1]"),
    (["--patience", "0"], "--patience 0: must be at least 1"),
    (["--first-pass", "dropout"], "--first-pass 'dropout': choose eval or train"),
    (["--first-pass", "train", "--attribution", "iga"], "--first-pass train: offered for --attribution ga and aa only"),
    (["--rdrop", "-1"], "--rdrop -1.0: must be a number at least 0"),
    (["--ood", "hans"], "--ood 'hans': the one out-of-distribution set is paws"),
    (["--ood", "paws", "--task", "rte"], "--ood paws: PAWS is paraphrase identification; use it with --task mrpc or qqp"),
    (["--task", "conll2003", "--shots", "8"], "--shots: few-shot sampling draws K examples per class"),
    (["--save-every", "0"], "argument --save-every: '0': must be more than 0 steps or minutes"),
    (["--save-every", "-5"], "argument --save-every: '-5': must be more than 0 steps or minutes"),
    (["--save-every", "0m"], "argument --save-every: '0m': must be more than 0 steps or minutes"),
    (["--save-every", "ten"], "argument --save-every: 'ten': a number of steps (500) or of minutes (10m)"),
    (["--shots-holdout"], "--shots-holdout: holds out K examples per class of a --shots K run; pass --shots K"),
    (["--shots", "8", "--shots-holdout", "--holdout", "0.2"], "--shots-holdout and --holdout: choose one"),
    (["--shots", "8", "--limit", "100"], "--shots 8 and --limit 100: both choose the training examples"),
    (["--dev-once"], "--dev-once: dev must not pick the epoch it is scored at"),
    (["--tie-break", "last"], "argument --tie-break: invalid choice: 'last'"),
    (["--compile", "tensorrt-nope"], "--compile 'tensorrt-nope': not a torch.compile backend"),
    (["--task", "stsb", "--shots", "8"], "--shots: few-shot sampling draws K examples per class; stsb is a regression"),
    (["--labels", "gold", "--attribution", "aa"], "--labels gold: --attribution aa attributes no label"),
    (["--labels", "gold", "--attribution", "RD"], "--labels gold: --attribution rd attributes no label"),
])
def test_new_flags_refused_by_name(capsys, argv, message):
    """The flags this file's features added refuse a bad value in parse_args, in one line naming it."""
    with pytest.raises(SystemExit):
        settings.parse_args(argv)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err

# -----------------------------------------------------------------------------
# a run's folder: --out under a file, writes that survive a full disk, one run per folder

def test_out_under_a_file_is_refused_by_name(tmp_path, capsys):
    """--out below a file (out/metrics.json/run1, say) is refused in parse_args, naming that file: the first
    mkdir would otherwise stop the run with a NotADirectoryError traceback, after the data and model loaded."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    for out in (a_file / "run1", a_file / "a" / "b"):
        with pytest.raises(SystemExit):
            settings.parse_args(["--out", str(out)])
        err = capsys.readouterr().err.splitlines()
        assert err[-1].endswith(f"error: --out {out}: {a_file} is a file, so no folder can be made under it; "
                                "pass another --out"), err
    assert settings.parse_args(["--out", str(tmp_path / "new" / "run1")]).out == str(tmp_path / "new" / "run1")


def tiny_net(seed):
    torch.manual_seed(seed)
    cfg = model.Config(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=8, max_position_embeddings=16)
    return model.Model(cfg, 2)


def no_space():
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fake_safetensors(tensors, filename, metadata=None):
    """safetensors' save_file on a full disk: part of the file, then its own error naming the OS error."""
    Path(filename).write_bytes(b"\x10\x00\x00\x00")
    from safetensors import SafetensorError
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def fake_write_text(self, text, *args, **kwargs):
    with open(self, "w") as f:
        f.write(text[:5])
    raise no_space()


def fake_torch_save(obj, f, *args, **kwargs):
    f.write(b"PK\x03\x04")
    raise no_space()


def fake_copyfile(src, dst, *args, **kwargs):
    Path(dst).write_bytes(Path(src).read_bytes()[:5])
    raise no_space()


def save_cases(tmp_path):
    """name -> (the file, save it: f(version), patch making its real write fail like a full disk)."""
    import train as train_py
    out = tmp_path / "out"
    out.mkdir()
    for v in (0, 1):  # two tokenizers with different bytes to copy from
        (tmp_path / f"w{v}").mkdir()
        (tmp_path / f"w{v}" / "tokenizer.json").write_text(json.dumps({"model": {}, "version": v}))
    net = tiny_net(0)
    opt = train_py.adamw(net, 1e-3, 0.0)
    write_text = (Path, "write_text", fake_write_text)
    return {
        "model.safetensors": (out / "model.safetensors",
                              lambda v: checkpoint.save_pretrained(tiny_net(v), out), (checkpoint, "save_file", fake_safetensors)),
        "config.json": (out / "config.json",
                        lambda v: checkpoint.save_pretrained(tiny_net(0), out, {"version": v}), write_text),
        "metrics.json": (out / "metrics.json", lambda v: checkpoint.write_json(out / "metrics.json", {"v": v}), write_text),
        "train_state.pt": (out / state.STATE,
                           lambda v: state.save_state(out, True, 1, {}, net, opt, {"epoch": v, "step": v}),
                           (torch, "save", fake_torch_save)),
        "tokenizer.json": (out / "tokenizer.json", lambda v: checkpoint.copy_tokenizer(tmp_path / f"w{v}", out),
                           (shutil, "copyfile", fake_copyfile)),
        "RTE.tsv": (out / "RTE.tsv", lambda v: metrics_py.write_glue_submission(out / "RTE.tsv", "rte", [0, 1], [v, 1]),
                    write_text),
    }


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "metrics.json", "train_state.pt",
                                  "tokenizer.json", "RTE.tsv"])
def test_full_disk_leaves_the_previous_file_whole(tmp_path, monkeypatch, name):
    """Every file a run writes goes through checkpoint.atomic_write: when the disk fills in the middle of writing
    the next version (the real write function replaced by one that writes a few bytes, then raises ENOSPC),
    the file already there stays byte for byte what it was, no .tmp is left, and the error is a SaveError (an
    OSError) whose one line names the file and the reason."""
    path, save, patch = save_cases(tmp_path)[name]
    save(0)
    before = path.read_bytes()
    monkeypatch.setattr(*patch)
    with pytest.raises(checkpoint.SaveError) as e:
        save(1)
    monkeypatch.undo()
    assert str(e.value) == f"could not write {path}: No space left on device; the previous {path} is unchanged"
    assert isinstance(e.value, OSError) and "\n" not in str(e.value)
    assert path.read_bytes() == before
    assert not list(path.parent.glob("*.tmp"))
    save(1)  # with room on the disk again the same save goes through
    assert path.read_bytes() != before


@pytest.mark.parametrize("name", ["model.safetensors", "metrics.json", "train_state.pt", "tokenizer.json"])
def test_a_save_is_forced_to_disk_before_its_rename_and_its_folder_after(tmp_path, monkeypatch, name):
    """A crash of the machine (not just of the process) must find the old file or the whole new one: the
    temporary file's data reach the disk (fsync) before the rename, and the folder's entry after it. The file
    is readable as any other the user makes (the umask's mode)."""
    path, save, _ = save_cases(tmp_path)[name]
    events, fsync, replace = [], os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(b))), replace(a, b)))
    save(0)
    i = events.index(("replace", str(path)))
    assert events[i - 1:i + 2] == [("fsync", f"{path}.tmp"), ("replace", str(path)), ("fsync", str(path.parent))], events
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes files (safetensors' own: 0600)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("name", ["metrics.json", "train_state.pt", "tokenizer.json"])
def test_a_real_full_disk(tmp_path, name):
    """The same with the kernel's own ENOSPC: PATH.tmp is made a link to /dev/full, which fails every write
    as a full disk does. torch.save in particular must let that OSError through (state.torch_save writes via a
    raw file); given a path, torch reports a full disk as a RuntimeError about zip offsets, naming nothing."""
    path, save, _ = save_cases(tmp_path)[name]
    save(0)
    before = path.read_bytes()
    path.with_name(path.name + ".tmp").symlink_to("/dev/full")
    with pytest.raises(checkpoint.SaveError, match=re.escape(f"could not write {path}: No space left on device; the "
                                                        f"previous {path} is unchanged")):
        save(1)
    assert path.read_bytes() == before and not list(path.parent.glob("*.tmp"))


def test_no_previous_file_is_said_so(tmp_path, monkeypatch):
    """A first save that fails says nothing was written, rather than promising a previous file."""
    monkeypatch.setattr(Path, "write_text", fake_write_text)
    with pytest.raises(checkpoint.SaveError) as e:
        checkpoint.write_json(tmp_path / "metrics.json", {})
    assert str(e.value).endswith(f"No space left on device; nothing was written to {tmp_path / 'metrics.json'}")
    assert not list(tmp_path.iterdir())


def dead_pid():
    """The pid of a process that has finished and been reaped: no process has it (for a while)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def write_lock(out, pid, host=None, started="2024-01-02T03:04:05+00:00"):
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.lock").write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                              "started": started, "argv": ["train.py"]}))


def test_on_windows_a_lock_on_this_machine_is_judged_by_its_heartbeat(tmp_path, monkeypatch):
    """On Windows os.kill(pid, 0) does not ask whether a process exists: it sends Ctrl-C to its process group.
    There a lock of this machine is judged as another machine's is, by its heartbeat, and os.kill is never
    called; so is a live run's lock refused and a stale one taken over."""
    out = tmp_path / "out"
    write_lock(out, os.getpid(), host=socket.gethostname())
    monkeypatch.setattr(state, "WINDOWS", True)
    monkeypatch.setattr(os, "kill", lambda *a: pytest.fail("os.kill called on Windows"))
    held = json.loads((out / "run.lock").read_text())
    assert state._gone(held, out / "run.lock") == ""  # refreshed just now: may still run
    old = time.time() - state.STALE_AFTER - 60
    os.utime(out / "run.lock", (old, old))
    assert "has not refreshed its lock" in state._gone(held, out / "run.lock")


def test_a_second_run_into_a_locked_folder_is_refused(tmp_path):
    """While one run holds --out, another is refused in one line that names the holder's pid, host and start
    and says what to do; the holder may be this very process or another one that still runs."""
    out, lock = tmp_path / "out", tmp_path / "out" / "run.lock"
    handle = state.lock_run_dir(out)
    claim = json.loads(lock.read_text())
    assert claim["pid"] == os.getpid() and claim["host"] == socket.gethostname() and claim["argv"] == sys.argv
    with pytest.raises(state.Busy) as e:  # a SystemExit: train.py exits with it; a sweep skips the run
        state.lock_run_dir(out)
    assert e.value.code == (f"error: {lock}: another run is using {out} (pid {os.getpid()} on {socket.gethostname()}, "
                            f"started {claim['started']}); wait for it to finish, pass another --out, or delete "
                            f"{lock} if that run is truly gone")
    state.unlock_run_dir(handle)
    assert not lock.exists()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(out, other.pid)
        with pytest.raises(SystemExit, match=f"another run is using {re.escape(str(out))} \\(pid {other.pid} on "):
            state.lock_run_dir(out)
    finally:
        other.kill()
        other.wait()
    write_lock(out, dead_pid(), host="another-machine")  # cannot be checked from here: counts as running
    with pytest.raises(SystemExit, match="on another-machine, started 2024-01-02T03:04:05"):
        state.lock_run_dir(out)


def test_a_lock_whose_run_is_gone_is_taken_over(tmp_path, capsys):
    """A lock left by a run on this machine that no longer runs (SIGKILL, a reboot) is taken over with one
    line that says so; run_lock then holds the folder for its block and removes the lock at the end."""
    out, lock, pid = tmp_path / "out", tmp_path / "out" / "run.lock", dead_pid()
    write_lock(out, pid)
    with state.run_lock(out):
        assert capsys.readouterr().out == (f"run.lock: the run that held {out} (pid {pid} on {socket.gethostname()}, "
                                           "started 2024-01-02T03:04:05+00:00) is gone; taking the folder over\n")
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()


def test_a_lock_from_another_machine_is_stale_only_when_its_heartbeat_stops(tmp_path, capsys, monkeypatch):
    """A lock written on another machine (a folder shared between nodes, as a requeued job sees it) cannot be
    checked by pid: its modification time, which its run refreshes every HEARTBEAT seconds, decides. Refreshed
    within STALE_AFTER: refused as now. Older: taken over, with a note that says how long it was silent."""
    out, lock = tmp_path / "out", tmp_path / "out" / "run.lock"
    write_lock(out, 4242, host="node-17")
    with pytest.raises(state.Busy, match="pid 4242 on node-17"):
        state.lock_run_dir(out)
    old = lock.stat().st_mtime - state.STALE_AFTER - 60
    os.utime(lock, (old, old))
    with state.run_lock(out):
        note = capsys.readouterr().out
        assert note.startswith(f"run.lock: the run that held {out} (pid 4242 on node-17, started 2024-01-02T03:04:05")
        assert f"has not refreshed its lock for {state.STALE_AFTER + 60:.0f} s (stale after" in note
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()


def test_a_lock_shared_by_two_processes_beats_until_its_holder_dies(tmp_path, monkeypatch):
    """Two processes on one path, the second posing as another machine: while the holder runs, its heartbeat
    keeps the lock fresh, and the other is refused although more than STALE_AFTER has passed since the lock
    was written; once the holder is killed (SIGKILL: no release), the lock goes stale and is taken over."""
    out, lock = tmp_path / "out", tmp_path / "out" / "run.lock"
    holder = subprocess.Popen([sys.executable, "-c", "from support import state; import sys, time\n"
                               "state.HEARTBEAT = 0.1\n"
                               f"with state.run_lock({str(out)!r}):\n"
                               "    print('held', flush=True); time.sleep(60)"],
                              cwd=HERE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(socket, "gethostname", lambda: "another-node")
        monkeypatch.setattr(state, "STALE_AFTER", 1.0)
        written = lock.stat().st_mtime
        time.sleep(1.5)
        assert lock.stat().st_mtime > written  # the heartbeat refreshed it
        with pytest.raises(state.Busy, match=f"pid {holder.pid} on "):
            state.lock_run_dir(out)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(1.5)
    handle = state.lock_run_dir(out)
    assert json.loads(lock.read_text())["host"] == "another-node"
    state.unlock_run_dir(handle)


def test_a_state_saved_on_a_cpu_resumes_on_a_gpu():
    """A state saved on a CPU holds no CUDA random stream; resuming it with --device cuda (a flag free to change
    on resume) sets the CPU stream and leaves CUDA's as seeded, instead of failing on the missing key."""
    saved = torch.get_rng_state()
    torch.rand(3)
    state.restore_rng({"cpu": saved}, torch.device("cuda"))  # no CUDA call is made: none is needed
    assert torch.equal(torch.get_rng_state(), saved)


def test_a_stop_signal_raises_a_flag_and_one_too_late_goes_on_outward():
    """Inside `with StopSignals()` SIGTERM and SIGUSR1 only raise a flag (the process goes on); a signal that the
    block received but did not act on (it arrived after the last step of a run) is handed to the handler outside
    when the block ends, so a sweep around the run still stops before its next run; outside every block the
    previous handlers are back."""
    before = signal.getsignal(signal.SIGTERM)
    with state.StopSignals() as outer:
        with state.StopSignals() as inner:
            os.kill(os.getpid(), signal.SIGUSR1)
            assert inner.signum == signal.SIGUSR1 and outer.signum is None
        assert outer.signum == signal.SIGUSR1
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_garbled_lock_is_refused_and_release_keeps_a_lock_not_ours(tmp_path):
    """A lock file that is not one (empty, not JSON, no pid) is refused naming it, not guessed at; releasing
    removes the lock only while it is still ours (a run that took the folder over owns it then)."""
    out, lock = tmp_path / "out", tmp_path / "out" / "run.lock"
    out.mkdir()
    for text in ("", "{not json", '{"pid": 0, "host": "h", "started": "t"}'):
        lock.write_text(text)
        with pytest.raises(SystemExit, match=f"error: {re.escape(str(lock))}: not a lock this script wrote"):
            state.lock_run_dir(out)
    lock.unlink()
    handle = state.lock_run_dir(out)
    write_lock(out, os.getpid(), started="later")
    state.unlock_run_dir(handle)
    assert json.loads(lock.read_text())["started"] == "later"


@pytest.mark.slow
def test_train_py_holds_its_folder(setup, tmp_path):
    """As a user meets it: train.py into a folder that a running process holds exits with the one-line refusal
    and writes nothing; once that process is gone, the next run takes the folder over, trains, and leaves no
    lock behind."""
    out, lock = tmp_path / "out", tmp_path / "out" / "run.lock"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(out, other.pid)
        r = train(setup, out, "--epochs", "1", check=False)
    finally:
        other.kill()
        other.wait()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {lock}: another run is using {out} (pid {other.pid} on")
    assert sorted(p.name for p in out.iterdir()) == ["run.lock"]
    r = train(setup, out, "--epochs", "1")  # other.pid is free now: the lock is stale
    assert f"run.lock: the run that held {out} (pid {other.pid} on" in r.stdout
    assert (out / "metrics.json").is_file() and not lock.exists()

# -----------------------------------------------------------------------------
# token tasks (CoNLL-2003) in the same loop; --predict; --ood; R-Drop

TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


def write_conll(folder, sizes=(("train", 21), ("dev", 12), ("test", 9)), seed=0):
    """A synthetic CoNLL-2003 folder: sentences of random words, each tagged with an entity of one to
    three words somewhere, in the 4-column IOB2 format with -DOCSTART- lines."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    for split, n in sizes:
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            words = rng.choices(WORDS, k=rng.randint(3, 12))
            tags = ["O"] * len(words)
            kind, start = rng.choice(["PER", "ORG", "LOC", "MISC"]), rng.randrange(len(words))
            for i in range(start, min(len(words), start + rng.randint(1, 3))):
                tags[i] = ("B-" if i == start else "I-") + kind
            lines += [f"{w} NN B-NP {t}" for w, t in zip(words, tags)] + [""]
        (folder / f"{split}.txt").write_text("\n".join(lines))


@pytest.fixture(scope="module")
def conll(setup):
    """CoNLL-2003 in a folder beside the synthetic GLUE folder (where users may keep it), and the
    tiny random BERT with a 9-tag token head made from w0's encoder at training time."""
    write_conll(setup / "conll2003")
    return setup


@pytest.mark.slow
def test_token_task_two_ranks_equal_one_process_and_resume(conll):
    """Token tasks run in the same loop: a 2-epoch CoNLL run (plain, then AD-DROP with q = 1, dropout 0)
    in two processes under torchrun follows the one-process run to 1e-5 in every step's loss (each rank's
    loss is its share of the global batch's mean over SCORED tokens, which it must count before the split),
    and one epoch plus --resume equals the two-epoch run bit for bit."""
    flags = ["--task", "conll2003", "--epochs", "2", "--p", "0.5", "--q", "1.0", "--lr", "1e-3"]
    train(conll, conll / "tok1", *flags)
    train(conll, conll / "tok2", *flags, torchrun=2)
    one, two = metrics(conll / "tok1"), metrics(conll / "tok2")
    assert [h["kind"] for h in one["history"]] == ["plain", "AD-DROP"] and one["history"][1]["dropped"] > 0
    for h1, h2 in zip(one["history"], two["history"]):
        assert len(h1["step_losses"]) == 3
        assert max(abs(a - b) for a, b in zip(h1["step_losses"], h2["step_losses"])) < 1e-5
        assert abs(h1["dev_loss"] - h2["dev_loss"]) < 1e-5 and h1["f1"] == h2["f1"]
    out = conll / "tok_resumed"
    train(conll, out, *flags[:2], "--epochs", "1", *flags[4:])
    train(conll, out, *flags, "--resume")
    assert [h["step_losses"] for h in metrics(out)["history"]] == [h["step_losses"] for h in one["history"]]
    assert all(torch.equal(a, b) for a, b in zip(final_weights(out).values(), final_weights(conll / "tok1").values()))


def test_token_task_predicts_every_word(conll, tmp_path):
    """--predict on CoNLL writes OUT/dev_predictions.txt and OUT/test_predictions.txt as conlleval reads them:
    one `word gold predicted` line per word of the file, in order, a blank line after each sentence; gold
    is the file's tag. With --max-len 8 some words are cut: the run says how many, and they still have a
    line (predicted O). The scores in metrics.json are the ones these files give (metrics.compute_metrics on
    them), and the checkpoint's config.json carries the tag set as id2label. --holdout and bf16 work too, and
    --dev-limit samples dev for the epochs only: the prediction files and their scores cover every sentence."""
    import data
    out = tmp_path / "pred"
    r = train(conll, out, "--task", "conll2003", "--epochs", "2", "--p", "0.5", "--q", "0.5", "--lr", "1e-3",
              "--max-len", "8", "--predict", "--holdout", "0.25", "--dtype", "bf16", "--dev-limit", "5")
    assert re.search(r"train: --max-len 8 cuts \d+ words in \d+ sentences; they are scored as predicted O", r.stdout)
    for split in ("dev", "test"):
        gold = data.read_conll(conll / "conll2003" / f"{split}.txt", data.CONLL_TAGS)
        blocks = (out / f"{split}_predictions.txt").read_text().strip("\n").split("\n\n")
        assert len(blocks) == len(gold)
        preds = []
        for block, e in zip(blocks, gold):
            rows = [line.split(" ") for line in block.split("\n")]
            assert [w for w, _, _ in rows] == list(e.text_a) and [TAGS.index(g) for _, g, _ in rows] == list(e.label)
            preds.append([TAGS.index(p) for _, _, p in rows])
        expected = metrics_py.compute_metrics("conll2003", preds, [e.label for e in gold])
        assert metrics(out)["predictions"][split] == pytest.approx(expected, abs=1e-12)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["id2label"] == {str(i): t for i, t in enumerate(TAGS)} and cfg["task"] == "conll2003"
    assert metrics(out)["selection"] == "holdout" and "5 dev" in r.stdout


@pytest.mark.slow
def test_glue_predict_writes_the_submission_file(setup, tmp_path):
    """--predict on a GLUE task writes OUT/RTE.tsv from the best epoch's weights: the header GLUE's server
    reads, one row per test example with its index, each label one of RTE's strings."""
    glue = tmp_path / "glue"
    shutil.copytree(setup / "glue", glue)
    rows = ["index\tsentence1\tsentence2"] + [f"{i}\tthe cat sat\tthe dog ran" for i in range(7)]
    (glue / "RTE" / "test.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(HERE / "train.py"), "--task", "rte", "--weights", str(setup / "w0"),
                        "--data-dir", str(glue), "--out", str(out), "--max-len", "24", "--epochs", "1",
                        "--threads", "1", "--predict"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (out / "RTE.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 8
    assert [l.split("\t")[0] for l in lines[1:]] == [str(i) for i in range(7)]
    assert {l.split("\t")[1] for l in lines[1:]} <= {"entailment", "not_entailment"}


@pytest.mark.slow
def test_predict_completes_a_glue_submission(setup, tmp_path):
    """The GLUE files beyond the paper's eight tasks: --predict on MNLI also labels GLUE's diagnostic set
    (DATA/diagnostic/diagnostic.tsv) as AX.tsv, beside MNLI-m.tsv and MNLI-mm.tsv, each with its own indices
    and MNLI's label strings; without that file the run is refused before training, naming the path and
    where to get it. --task wnli trains and writes WNLI.tsv ('0'/'1')."""
    rng = random.Random(3)
    sent = lambda: " ".join(rng.choices(WORDS, k=rng.randint(3, 9)))
    def tsv(path, header, n, start=0, label=None):
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [header] + [f"{start + i}\t{sent()}\t{sent()}" + (f"\t{rng.choice(label)}" if label else "")
                           for i in range(n)]
        path.write_text("\n".join(rows) + "\n")
    glue, nli = tmp_path / "glue", ("contradiction", "entailment", "neutral")
    for split, n in (("train", 24), ("dev_matched", 8)):
        tsv(glue / "MNLI" / f"{split}.tsv", "index\tsentence1\tsentence2\tgold_label", n, label=nli)
    tsv(glue / "MNLI" / "test_matched.tsv", "index\tsentence1\tsentence2", 5)
    tsv(glue / "MNLI" / "test_mismatched.tsv", "index\tsentence1\tsentence2", 4, start=100)
    for split, n in (("train", 24), ("dev", 8)):
        tsv(glue / "WNLI" / f"{split}.tsv", "index\tsentence1\tsentence2\tlabel", n, label="01")
    tsv(glue / "WNLI" / "test.tsv", "index\tsentence1\tsentence2", 6)
    bare = tmp_path / "bare"  # w0 without its 2-label classifier: MNLI has 3 labels
    shutil.copytree(setup / "w0", bare)
    weights = load_file(str(bare / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")}, str(bare / "model.safetensors"))

    def run(task, out):
        return subprocess.run([sys.executable, str(HERE / "train.py"), "--task", task, "--weights", str(bare),
                               "--data-dir", str(glue), "--out", str(tmp_path / out), "--max-len", "24",
                               "--epochs", "1", "--threads", "1", "--predict"], capture_output=True, text=True,
                              timeout=300)
    r = run("mnli", "refused")
    ax = glue / "diagnostic" / "diagnostic.tsv"
    assert r.returncode != 0 and "Traceback" not in r.stderr and str(ax) in r.stderr and "AX.tsv" in r.stderr, r.stderr
    assert not (tmp_path / "refused" / "metrics.json").exists()
    tsv(ax, "index\tsentence1\tsentence2", 7, start=0)
    for task, out, files in (("mnli", "mnli", {"MNLI-m.tsv": range(5), "MNLI-mm.tsv": range(100, 104),
                                               "AX.tsv": range(7)}),
                             ("wnli", "wnli", {"WNLI.tsv": range(6)})):
        r = run(task, out)
        assert r.returncode == 0, r.stderr[-2000:]
        for name, indices in files.items():
            lines = (tmp_path / out / name).read_text().splitlines()
            assert lines[0] == "index\tprediction" and [int(l.split("\t")[0]) for l in lines[1:]] == list(indices)
            assert {l.split("\t")[1] for l in lines[1:]} <= (set(nli) if task == "mnli" else {"0", "1"})


@pytest.mark.slow
def test_ood_paws_and_rdrop_run(setup, tmp_path):
    """An MRPC run with --ood paws --rdrop 1 trains with R-Drop and scores the best epoch's weights on PAWS's
    test file at the end: metrics.json's ood holds accuracy and f1, and the accuracy is what the saved best
    checkpoint predicts on the file's 10 pairs, recomputed here. R-Drop changes the training: the same run
    without it (same seed, same data) has other step losses from the first step on."""
    rng = random.Random(3)
    (tmp_path / "glue" / "MRPC").mkdir(parents=True)
    for split, n in (("train", 24), ("dev", 8)):
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [f"{rng.randint(0, 1)}\t1\t2\t{' '.join(rng.choices(WORDS, k=6))}\t{' '.join(rng.choices(WORDS, k=6))}"
                 for _ in range(n)]
        (tmp_path / "glue" / "MRPC" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    (tmp_path / "paws").mkdir()
    rows = ["id\tsentence1\tsentence2\tlabel"] + [
        f"{i}\t{' '.join(rng.choices(WORDS, k=5))}\t{' '.join(rng.choices(WORDS, k=5 + i % 3))}\t{rng.randint(0, 1)}"
        for i in range(10)]
    (tmp_path / "paws" / "test.tsv").write_text("\r\n".join(rows) + "\r\n")

    def run(out, *flags):
        r = subprocess.run([sys.executable, str(HERE / "train.py"), "--task", "mrpc", "--weights", str(setup / "w1"),
                            "--data-dir", str(tmp_path / "glue"), "--out", str(out), "--max-len", "24", "--epochs",
                            "2", "--threads", "1", *flags], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return metrics(out)
    m = run(tmp_path / "out", "--rdrop", "1.0", "--ood", "paws")
    ood = m["ood"]
    assert ood["task"] == "paws" and set(ood) >= {"accuracy", "f1", "metric"}
    import data
    net = checkpoint.from_pretrained(tmp_path / "out", 2).eval()
    tok = data.load_tokenizer(tmp_path / "out", 24)
    pairs = data.load_split("paws", "test", tmp_path / "glue")
    (b,) = data.batches(*data.encode(tok, pairs), 10, data.pad_token_id(tok))  # the 10 pairs, one batch
    with torch.no_grad():
        logits = net(b["input_ids"], b["attention_mask"], b["token_type_ids"])[0]
    assert ood["accuracy"] == pytest.approx((logits.argmax(-1) == b["labels"]).double().mean().item(), abs=1e-12)
    plain = run(tmp_path / "plain", "--no-checkpoint")
    assert m["history"][0]["step_losses"][0] != plain["history"][0]["step_losses"][0]


def test_rdrop_loss_by_hand():
    """R-Drop's loss on two forwards' logits: the mean of their cross-entropies plus alpha times the
    symmetric KL divergence 1/2 (KL(P1||P2) + KL(P2||P1)), here worked out by hand for one example with two
    classes; identical forwards add nothing; IGNOREd tokens add nothing, and are left out with no op whose
    output shape depends on the labels; regression adds alpha (y1 - y2)^2."""
    import math
    import train as train_py
    from support import rdrop
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])  # P1 = (1/2, 1/2), P2 = (3/4, 1/4)
    y = torch.tensor([0])
    ce = (math.log(2) + math.log(4 / 3)) / 2
    kl12 = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    kl21 = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert abs(rdrop.loss_sum(logits, y, False, 2.0, train_py.loss_sum).item() - (ce + (kl12 + kl21))) < 1e-6
    same = torch.tensor([[0.3, -1.0], [0.3, -1.0]])
    assert abs(rdrop.loss_sum(same, y, False, 5.0, train_py.loss_sum).item() - train_py.loss_sum(same[:1], y, False).item()) < 1e-6
    tok = torch.randn(2, 3, 4)  # two copies of one sentence of 3 tokens, 4 tags; only token 1 is scored
    ty = torch.tensor([[-100, 2, -100]])
    scored_only = rdrop.loss_sum(tok[:, 1:2], ty[:, 1:2], False, 1.0, train_py.loss_sum)
    assert abs(rdrop.loss_sum(tok, ty, False, 1.0, train_py.loss_sum).item() - scored_only.item()) < 1e-6
    reg = torch.tensor([[1.0], [3.0]])
    assert abs(rdrop.loss_sum(reg, torch.tensor([2.0]), True, 0.5, train_py.loss_sum).item() - (1 + 0.5 * 4)) < 1e-6
    # with no shape that depends on the labels (an index by a mask: a GPU would stop for its count)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(str(func))
            return func(*args, **(kwargs or {}))
    ops = []
    with Ops():
        rdrop.loss_sum(tok, ty, False, 1.0, train_py.loss_sum)
    assert ops and not [o for o in ops if o.split(".")[1] in ("index", "nonzero", "masked_select")], ops


def test_the_log_gives_the_mean_step_time_since_its_last_line(capsys):
    """ms/step in the log line is the time since the last line over the steps since: on a GPU, which runs ahead
    of the CPU until .item() waits, the last step's own time would be its queueing time, or the backlog."""
    import time
    import types
    import train as train_py
    j = types.SimpleNamespace(world=1, step=40, total_steps=100, say=print,
                              opt=types.SimpleNamespace(param_groups=[{"lr": 2e-5}]))
    train_py.log_step(j, torch.tensor(0.5), (time.time() - 2.0, 20))  # 20 steps in 2 s
    ms = float(capsys.readouterr().out.split("|")[-1].split()[0])
    assert 100 <= ms < 110, ms

# -----------------------------------------------------------------------------
# which examples a run sees: --limit samples, --limit-first takes the head

def test_limit_samples_by_seed_and_limit_first_takes_the_first_rows(setup):
    """data.load_splits on a 240-row RTE: --limit 40 --dev-limit 8 give a seeded stratified sample (the same
    rows for one seed, others for another, each label within one row of its share), and --limit-first gives rows 0-39 and
    0-7 under any seed, as the earlier compare_small read them."""
    import data

    def seen(seed, *flags):
        args = settings.parse_args(["--task", "rte", "--data-dir", str(setup / "glue_long"), "--limit", "40",
                                    "--dev-limit", "8", "--seed", str(seed), *flags])
        weights = checkpoint.resolve_weights(str(setup / "w0"))
        cfg = checkpoint.from_pretrained(weights, 2).cfg
        splits, _, _ = data.load_splits(args, data.get_task("rte"), weights, cfg, 24, say=lambda *a, **k: None)
        return [[ex.text_a for ex in splits[s].examples] for s in ("train", "dev")]

    every = [[ex.text_a for ex in data.load_split("rte", s, setup / "glue_long")] for s in ("train", "dev")]
    a, a_again, b = seen(0), seen(0), seen(1)
    assert a == a_again and a[0] != b[0] and len(a[0]) == 40 and len(a[1]) == 8
    assert a[0] != every[0][:40] and set(a[0]) <= set(every[0])
    full = [ex.label for ex in data.load_split("rte", "train", setup / "glue_long")]
    picked = [ex.label for ex in data.load_split("rte", "train", setup / "glue_long") if ex.text_a in set(a[0])]
    assert all(abs(picked.count(v) - 40 * full.count(v) / 240) <= 1 for v in set(full))  # stratified
    for seed in (0, 1):
        assert seen(seed, "--limit-first") == [every[0][:40], every[1][:8]]

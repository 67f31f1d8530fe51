"""
Every bad input a user can hand train.py or studies/bench.py is refused by name: one line that names the
file (and line) or the flag and says what is wrong, a non-zero exit, no Python traceback, and no
training step. Each case runs the real script in a subprocess, as a user meets it; test_model.py
and test_data.py check these errors and more of their kind in-process, message by message, and
bench.py's flags are checked here in-process too (a process costs 1.5 s of importing torch).

Everything is built here, in a temporary folder: a tiny random BERT (1 layer, 8 wide), a word-level
tokenizer and an 8-row RTE. No network, no GLUE download, no installed weights.

    python -m pytest -q test_cli.py     # 30-60 s on 2 busy cores: 30 processes, four at a time, each importing torch
    python test_cli.py                  # print each case and the line it gets
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, NamedTuple

import pytest
import torch
from safetensors.torch import load_file, save_file

from support import checkpoint
import model

# slow: whole scripts run as a user runs them; `python -m pytest -q -m slow` runs these (pytest.ini)
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent.parent  # the repository root
WORDS = "the a cat dog sat on mat big small red".split()
TRAIN = ["--task", "rte", "--limit", "8", "--max-len", "16", "--epochs", "1", "--dev-limit", "8", "--threads", "1"]
BENCH = ["--config", "base", "--skip-iga", "--no-hf", "--steps", "1", "--warmup", "0", "--threads", "1",
         "--batch-size", "2", "--seq-len", "8"]

# -----------------------------------------------------------------------------
# the good inputs every case starts from

def write_good(root):
    """root/w: a weights folder (config.json, model.safetensors, tokenizer.json); root/glue/RTE: 8 + 8 rows."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    torch.manual_seed(0)
    cfg = model.Config(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=8, max_position_embeddings=32)
    checkpoint.save_pretrained(model.Model(cfg, num_labels=2), root / "w")
    tok.save(str(root / "w" / "tokenizer.json"))
    (root / "glue" / "RTE").mkdir(parents=True)
    rows = ["index\tsentence1\tsentence2\tlabel"] + [
        f"{i}\tthe {WORDS[i]} sat on a mat\tthe {WORDS[i + 1]} sat\t{['entailment', 'not_entailment'][i % 2]}"
        for i in range(8)]
    for split in ("train", "dev"):
        (root / "glue" / "RTE" / f"{split}.tsv").write_text("\n".join(rows) + "\n")

# -----------------------------------------------------------------------------
# the cases: each makes its bad input in its own folder d and gives the flags that point at it

class Case(NamedTuple):
    script: str                         # train.py or studies/bench.py
    make: Callable[[Path, Path], list]  # (d, root of the good inputs) -> extra flags; may write under d
    expect: tuple                       # pieces of the error line; "{d}" stands for the case's folder
    env: dict = {}                      # extra environment; "{d}" as above
    ok: bool = False                    # True: the input is fine and the run must succeed


def weights(edit):
    """A copy of the good weights folder at d/w, changed by edit(d/w)."""
    def make(d, root):
        shutil.copytree(root / "w", d / "w")
        edit(d / "w")
        return ["--weights", str(d / "w")]
    return make


def glue(edit):
    """A copy of the good GLUE folder at d/glue, changed by edit(d/glue/RTE)."""
    def make(d, root):
        shutil.copytree(root / "glue", d / "glue")
        edit(d / "glue" / "RTE")
        return ["--data-dir", str(d / "glue")]
    return make


def flags(*args, files=()):
    """Just flags; files (paths under d) are created first, as empty files."""
    def make(d, root):
        for f in files:
            (d / f).write_text("")
        return [a.format(d=d) for a in args]
    return make


def config(**changes):
    """config.json with keys set (None: removed)."""
    def edit(w):
        cfg = json.loads((w / "config.json").read_text())
        cfg.update(changes)
        (w / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    return edit


def tensors(fn):
    """model.safetensors with its tensors changed by fn(dict)."""
    def edit(w):
        t = load_file(w / "model.safetensors")
        fn(t)
        save_file(t, str(w / "model.safetensors"))
    return edit


def write_to(name, raw):
    def edit(folder):
        (folder / name).write_bytes(raw)
    return edit


def cut(name, keep):
    def edit(folder):
        (folder / name).write_bytes((folder / name).read_bytes()[:keep(folder / name)])
    return edit


def replace_line(name, lineno, raw):
    """Line lineno (1-based) of a file replaced by the bytes raw."""
    def edit(folder):
        lines = (folder / name).read_bytes().split(b"\n")
        lines[lineno - 1] = raw
        (folder / name).write_bytes(b"\n".join(lines))
    return edit


def folder_instead(name):
    def edit(folder):
        (folder / name).unlink()
        (folder / name).mkdir()
    return edit


W, GLUE = "{d}/w", "{d}/glue/RTE"
Q = "bert.encoder.layer.0.attention.self.query.weight"
WORD = "bert.embeddings.word_embeddings.weight"
CASES = {
    # model.safetensors
    "safetensors empty": Case("train.py", weights(write_to("model.safetensors", b"")),
                              (f"{W}/model.safetensors (0 bytes): it is empty",)),
    "safetensors truncated": Case("train.py", weights(cut("model.safetensors", lambda p: p.stat().st_size // 2)),
                                  (f"{W}/model.safetensors (", "probably truncated or corrupt")),
    "safetensors corrupt": Case("train.py", weights(write_to("model.safetensors", bytes(range(256)) * 8)),
                                (f"{W}/model.safetensors (2048 bytes): not a readable safetensors file",)),
    "tensor stored as int": Case("train.py", weights(tensors(lambda t: t.update({Q: t[Q].to(torch.int64)}))),
                                 (f"{W}/model.safetensors: key {Q} is stored as torch.int64",)),
    "weights in float16 load": Case("train.py", weights(tensors(lambda t: t.update({k: v.half() for k, v in t.items()}))),
                                    (), ok=True),
    "weights in bfloat16 load": Case("train.py", weights(tensors(lambda t: t.update({k: v.bfloat16() for k, v in t.items()}))),
                                     (), ok=True),
    # config.json
    "config not JSON": Case("train.py", weights(write_to("config.json", b'{\n  "hidden_size": 8,\n  oops\n}')),
                            (f"{W}/config.json line 3: not valid JSON",)),
    "config a JSON list": Case("train.py", weights(write_to("config.json", b"[8, 1, 2]")),
                               (f"{W}/config.json: expected a JSON object", "found a JSON list")),
    "config empty object": Case("train.py", weights(write_to("config.json", b"{}")),
                                (f"{W}/config.json: lacks model_type, vocab_size, hidden_size, num_hidden_layers, "
                                 "num_attention_heads, intermediate_size, max_position_embeddings",)),
    "config without hidden_size": Case("train.py", weights(config(hidden_size=None)),
                                       (f"{W}/config.json: lacks hidden_size, which the model needs",)),
    "config size as a string": Case("train.py", weights(config(hidden_size="8")),
                                    (f"{W}/config.json: bad config: hidden_size is '8', expected a positive integer",)),
    "config negative size": Case("train.py", weights(config(num_hidden_layers=-1)),
                                 (f"{W}/config.json: bad config: num_hidden_layers is -1",)),
    # tokenizer.json
    "tokenizer not JSON": Case("train.py", weights(write_to("tokenizer.json", b"[PAD]\n[UNK]\n")),
                               (f"{W}/tokenizer.json: not a tokenizer: not valid JSON (line 1",)),
    "tokenizer JSON but not a tokenizer": Case("train.py", weights(write_to("tokenizer.json", b'{"hidden_size": 8}')),
                                               (f"{W}/tokenizer.json: valid JSON, but not a tokenizer",)),
    "tokenizer missing": Case("train.py", weights(lambda w: (w / "tokenizer.json").unlink()),
                              (f"tokenizer not found: {W}/tokenizer.json",)),
    "tokenizer larger than the model's vocabulary": Case(  # needs train.py to pass net.cfg to data.load_tokenizer
        "train.py", weights(lambda w: (config(vocab_size=8)(w), tensors(lambda t: t.update({WORD: t[WORD][:8]}))(w))),
        (f"{W}/tokenizer.json: token ids reach 13", "vocab_size")),
    # the weights folder
    "weights a file": Case("train.py", flags("--weights", "{d}/w.zip", files=["w.zip"]),
                           ("weights: {d}/w.zip is a file, not a folder",)),
    # GLUE files
    "train.tsv not UTF-8": Case("train.py", glue(replace_line("train.tsv", 4, b"2\tcaf\xe9\tb\tentailment")),
                                (f"{GLUE}/train.tsv line 4: not UTF-8 text",)),
    "dev.tsv not UTF-8": Case("train.py", glue(replace_line("dev.tsv", 9, b"7\tthe cat\t\x80\tentailment")),
                              (f"{GLUE}/dev.tsv line 9: not UTF-8 text",)),
    "train.tsv empty": Case("train.py", glue(write_to("train.tsv", b"")),
                            (f"{GLUE}/train.tsv: no examples (the file is empty)",)),
    "train.tsv a folder": Case("train.py", glue(folder_instead("train.tsv")),
                               (f"{GLUE}/train.tsv: is a folder, not the RTE train file",)),
    "--data-dir a file": Case("train.py", flags("--data-dir", "{d}/glue.zip", files=["glue.zip"]),
                              ("--data-dir {d}/glue.zip: is a file, not a folder",)),
    "GLUE_DIR a file": Case("train.py", flags(files=["glue.zip"]), ("GLUE_DIR {d}/glue.zip: is a file, not a folder",),
                            env={"GLUE_DIR": "{d}/glue.zip"}),
    # flags
    "--max-len too short for the special tokens": Case("train.py", flags("--max-len", "3"), ("--max-len 3: too short",)),
    "--max-len above the position table": Case("train.py", flags("--max-len", "33"), ("--max-len 33", "32")),
    "--out a file": Case("train.py", flags("--out", "{d}/out.txt", files=["out.txt"]), ("--out {d}/out.txt",)),
    "--layers empty": Case("train.py", flags("--layers", ""), ("--layers '': expected 'first', 'all' or comma-separated",)),
    "--out unwritable": Case("train.py", flags("--out", "/proc/ad-drop-out"),
                             ("--out /proc/ad-drop-out: cannot write there",)),
    "--out under a file": Case("train.py", flags("--out", "{d}/out.txt/run1", files=["out.txt"]),
                               ("--out {d}/out.txt/run1: {d}/out.txt is a file",)),
    "--device unknown": Case("train.py", flags("--device", "gpu0"), ("--device 'gpu0'",)),
    "--device cuda without CUDA": Case("train.py", flags("--device", "cuda"), ("--device cuda",)),
    # studies/bench.py
    "bench --config unknown": Case("studies/bench.py", flags("--config", "large"), ("--config", "'large'")),
    "bench --seq-len above the position table": Case(
        "studies/bench.py", flags("--seq-len", "513"),
        ("--seq-len 513: the position table of --config base holds at most 512",)),
}

# -----------------------------------------------------------------------------
# running them

def run_case(name, root):
    """Make case `name`'s input under root/cases/<n> and run its script; returns (case folder, CompletedProcess)."""
    case = CASES[name]
    d = root / "cases" / str(list(CASES).index(name))
    d.mkdir(parents=True)
    base = TRAIN + ["--weights", str(root / "w"), "--out", str(d / "out")] if case.script == "train.py" else \
        BENCH + ["--json", str(d / "bench.json")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLUE_DIR": str(root / "glue")}
    env.update({k: v.format(d=d) for k, v in case.env.items()})
    cmd = [sys.executable, str(HERE / case.script), *base, *case.make(d, root)]
    return d, subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=d, timeout=300)


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Every selected case, run four processes at a time (each spends a second or two importing torch)."""
    root = tmp_path_factory.mktemp("cli")
    write_good(root)
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module.__name__ == __name__ and hasattr(item, "callspec") and "name" in item.callspec.params]
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(selected, pool.map(lambda n: run_case(n, root), selected)))


@pytest.mark.parametrize("name", list(CASES))
def test_refused_by_name(results, name):
    """The script exits non-zero with one error line that names the file (and line) or the flag, prints
    no traceback and no training step, and writes no metrics.json: refused before training started.
    Inputs that are fine (float16 and bfloat16 weights) train instead."""
    case = CASES[name]
    if name == "--device cuda without CUDA" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    d, r = results[name]
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-3000:]
    if case.ok:
        assert r.returncode == 0 and "best dev" in r.stdout, r.stderr[-2000:]
        return
    assert r.returncode != 0, r.stdout[-1000:]
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    line = lines[-1]
    if line.startswith("error: "):
        assert len(lines) == 1, lines  # our own one-liner: nothing else on stderr
    else:  # argparse: its usage, then one "<script>: error: ..." line
        assert line.startswith(f"{Path(case.script).name}: error: ") and sum("error:" in l for l in lines) == 1, lines
    for piece in case.expect:
        assert piece.format(d=d) in line, f"{piece.format(d=d)!r} not in {line!r}"
    assert "step 1/" not in r.stdout and "epoch 1" not in r.stdout
    assert not (d / "out" / "metrics.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["--batch-size", "0"], "--batch-size 0: must be at least 1"),
    (["--steps", "0"], "--steps 0: must be at least 1"),
    (["--iga-steps", "-1"], "--iga-steps -1: must be at least 1"),
    (["--threads", "0"], "--threads 0: must be at least 1"),
    (["--seq-len", "4"], "--seq-len 4: must be at least 8"),
    (["--warmup", "-1"], "--warmup -1: must be at least 0"),
    (["--seed", str(2**64)], f"--seed {2**64}: must be in [0, 2**63)"),
    (["--json", "{tmp}"], "--json {tmp}: is a folder; pass a file name"),
    (["--json", "{tmp}/no/such/b.json"], "--json {tmp}/no/such/b.json: its folder {tmp}/no/such does not exist"),
    (["--data-dir", "{tmp}/glue.zip"], "--data-dir {tmp}/glue.zip: is a file, not a folder"),
    (["--batch-size", "two"], "argument --batch-size: invalid int value: 'two'"),
])
def test_bench_flags_refused_in_parse_args(tmp_path, capsys, monkeypatch, argv, message):
    """bench.py refuses each bad flag in parse_args, before any model is built: argparse's usage and one
    'error:' line naming the flag (the subprocess cases above show the same through the real script)."""
    monkeypatch.syspath_prepend(str(HERE / "studies"))
    import bench
    (tmp_path / "glue.zip").write_text("")
    with pytest.raises(SystemExit) as e:
        bench.parse_args([a.format(tmp=tmp_path) for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert ": error: " + message.format(tmp=tmp_path) in err[-1], err  # "<prog>: error: ..."


if __name__ == "__main__":  # print the table: case, exit code, the line it prints
    with tempfile.TemporaryDirectory() as tmp:
        write_good(Path(tmp))
        with ThreadPoolExecutor(4) as pool:
            for name, (d, r) in zip(CASES, pool.map(lambda n: run_case(n, Path(tmp)), CASES)):
                out = (r.stderr.strip().splitlines() or [r.stdout.strip().splitlines()[-1]])[-1]
                print(f"| {name} | {r.returncode} | `{out.replace(str(d), '…')}` |")


def test_weights_by_name_are_found_in_the_weights_folder_beside_model_py():
    """--weights roberta-base means weights/roberta-base/, the folder weights/README.md fills, beside model.py
    (not beside checkpoint.py, which lives in support/)."""
    assert checkpoint.WEIGHTS == HERE / "weights" and (checkpoint.WEIGHTS / "README.md").is_file()
    named = checkpoint.WEIGHTS / f"test-name-{os.getpid()}"
    named.mkdir()
    try:
        assert checkpoint.resolve_weights(named.name) == named
    finally:
        named.rmdir()

"""GLUE data for fine-tuning: read the original TSV files, tokenise, batch, and score.

The eight GLUE tasks the AD-DROP paper fine-tunes on (Table 1): SST-2, MNLI, QNLI, QQP, CoLA, STS-B, MRPC, RTE.
Each reader follows the file exactly as GLUE's download script wrote it: split on '\t' with no CSV quote handling
(MNLI and QNLI text holds stray quote characters), a header looked up by column name where there is one, and a
DataError naming the file and line for any row that does not fit. Metrics follow the paper: Matthews correlation
for CoLA, Pearson for STS-B, accuracy for the rest; they are written out in numpy so there is nothing to install.
"""
import math
import os
import shutil
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch


class DataError(ValueError):
    """Anything wrong with the data on disk: a missing file, a malformed row, an unknown task or label."""


@dataclass(frozen=True)
class Task:
    name: str                      # as the paper and GLUE print it
    folder: str                    # subfolder of the data dir, named as GLUE's download script names it
    text_a: str                    # column of the first (or only) sentence
    text_b: str | None             # column of the second sentence; None for single-sentence tasks
    label_col: str                 # column of the gold label
    labels: tuple[str, ...] | None  # label strings; a label is stored as its index here. None: regression
    metrics: tuple[str, ...]       # what compute_metrics reports; the first is the paper's metric
    columns: tuple[str, ...] | None = None  # None: the first line is a header. Else the file has none: these
    dev_file: str = "dev.tsv"


BINARY = ("0", "1")
NLI2 = ("entailment", "not_entailment")
TASKS = {
    "sst2": Task("SST-2", "SST-2", "sentence", None, "label", BINARY, ("accuracy",)),
    "mnli": Task("MNLI", "MNLI", "sentence1", "sentence2", "gold_label",
                 ("contradiction", "entailment", "neutral"), ("accuracy",), dev_file="dev_matched.tsv"),
    "qnli": Task("QNLI", "QNLI", "question", "sentence", "label", NLI2, ("accuracy",)),
    "qqp": Task("QQP", "QQP", "question1", "question2", "is_duplicate", BINARY, ("accuracy", "f1")),
    "cola": Task("CoLA", "CoLA", "sentence", None, "label", BINARY, ("matthews", "accuracy"),
                 columns=("source", "label", "original_label", "sentence")),
    "stsb": Task("STS-B", "STS-B", "sentence1", "sentence2", "score", None, ("pearson", "spearman")),
    "mrpc": Task("MRPC", "MRPC", "#1 String", "#2 String", "Quality", BINARY, ("accuracy", "f1")),
    "rte": Task("RTE", "RTE", "sentence1", "sentence2", "label", NLI2, ("accuracy",)),
}

# Where ensure_task downloads each task from: the per-task archives of GLUE's download_glue_data.py.
# This table is the place to change a URL; ensure_task(url=...) overrides it for one call.
# MRPC is the exception: GLUE never published an MRPC zip (its script builds train/dev from Microsoft's
# msr_paraphrase_*.txt), so the URL below only follows the others' pattern and is unverified. Point it at any
# zip that holds MRPC/train.tsv and MRPC/dev.tsv (a file:// URL works too).
BASE_URL = "https://dl.fbaipublicfiles.com/glue/data/"
URLS = {"sst2": BASE_URL + "SST-2.zip", "mnli": BASE_URL + "MNLI.zip", "qnli": BASE_URL + "QNLIv2.zip",
        "qqp": BASE_URL + "QQP-clean.zip", "cola": BASE_URL + "CoLA.zip", "stsb": BASE_URL + "STS-B.zip",
        "mrpc": BASE_URL + "MRPC.zip", "rte": BASE_URL + "RTE.zip"}


class Example(NamedTuple):
    text_a: str
    text_b: str | None
    label: int | float  # index into task.labels, or the similarity score for STS-B


def _key(name):
    return name.lower().replace("-", "")  # so 'SST-2', 'sst-2' and 'sst2' all name the same task


def get_task(name):
    if _key(name) not in TASKS:
        raise DataError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[_key(name)]


def num_labels(task_name):
    labels = get_task(task_name).labels
    return len(labels) if labels is not None else 1  # regression: one output


def resolve_data_dir(arg=None):
    """--data-dir, else $GLUE_DIR, else data/glue next to this file (not the working directory).
    It need not exist yet (ensure_task downloads into it), but it must not be a file."""
    for source, d in (("--data-dir", arg), ("GLUE_DIR", os.environ.get("GLUE_DIR")),
                      ("the default data dir", Path(__file__).resolve().parent / "data" / "glue")):
        if d:
            d = Path(d)
            if d.exists() and not d.is_dir():
                raise DataError(f"{source} {d}: is a file, not a folder; pass the folder that holds the task "
                                "folders (RTE/, SST-2/, ...)")
            return d


def split_paths(task, data_dir):
    folder = Path(data_dir) / task.folder
    return {"train": folder / "train.tsv", "dev": folder / task.dev_file}


# -----------------------------------------------------------------------------
# reading

def read_tsv(path, task):
    """One task file -> list[Example]. Every row must have exactly as many columns as the header."""
    names, examples = task.columns, []  # names stays None until the header line is read
    col = None if names is None else {n: i for i, n in enumerate(names)}
    lineno = 0
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror})") from None
    # bytes, split on b'\n' only, so that a stray '\r' inside a sentence cannot split a row, and each line is
    # decoded alone, so that bytes which are not UTF-8 are reported with their line
    with f:
        for lineno, raw_line in enumerate(f, start=1):
            where = f"{path} line {lineno}"
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as e:
                if lineno == 1 and raw_line.startswith((b"\xff\xfe", b"\xfe\xff")):
                    raise DataError(f"{path}: the file is UTF-16; GLUE files are UTF-8: save it as UTF-8") from None
                raise DataError(f"{where}: not UTF-8 text (byte 0x{raw_line[e.start]:02x} at byte {e.start + 1} of the "
                                "line); GLUE files are UTF-8: re-download the file or save it as UTF-8") from None
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # MRPC's byte-order mark
            row = line.removesuffix("\n").removesuffix("\r").split("\t")
            if names is None:  # this is the header line
                names = row
                missing = [c for c in (task.text_a, task.text_b, task.label_col) if c and c not in names]
                if missing:
                    raise DataError(f"{where}: header lacks column(s) {missing}; it has {names}")
                col = {n: i for i, n in enumerate(names)}
                continue
            if len(row) != len(names):
                raise DataError(f"{where}: expected {len(names)} tab-separated columns, got {len(row)}")
            raw = row[col[task.label_col]].strip()
            if task.labels is None:
                try:
                    label = float(raw)
                except ValueError:
                    raise DataError(f"{where}: cannot parse score {raw!r} as a float") from None
                if not math.isfinite(label):
                    raise DataError(f"{where}: score {raw!r} is not a finite number")
            elif raw in task.labels:
                label = task.labels.index(raw)
            else:
                raise DataError(f"{where}: unknown label {raw!r}; expected one of {task.labels}")
            examples.append(Example(row[col[task.text_a]], row[col[task.text_b]] if task.text_b else None, label))
    if not examples:
        raise DataError(f"{path}: no examples " + ("(the file is empty)" if lineno == 0 else "below the header"))
    return examples


def load_split(task_name, split, data_dir):
    """Examples of one split ('train' or 'dev'; for MNLI 'dev' is dev_matched). Reads only; see ensure_task."""
    task = get_task(task_name)
    paths = split_paths(task, data_dir)
    if split not in paths:
        raise DataError(f"unknown split {split!r}; expected 'train' or 'dev'")
    if paths[split].is_dir():
        raise DataError(f"{paths[split]}: is a folder, not the {task.name} {split} file")
    if not paths[split].is_file():
        raise DataError(f"{task.name} {split} file not found: {paths[split]} "
                        f"(pass --data-dir or set GLUE_DIR to the folder that holds {task.folder}/)")
    return read_tsv(paths[split], task)


def ensure_task(task_name, data_dir, url=None):
    """Download and unpack a task's GLUE archive unless its train and dev files are already there."""
    task, data_dir = get_task(task_name), Path(data_dir)
    folder, needed = data_dir / task.folder, list(split_paths(task, data_dir).values())
    for p in (data_dir, folder):
        if p.exists() and not p.is_dir():
            raise DataError(f"{p}: is a file, not a folder; the data dir holds one folder per task ({task.folder}/)")
    for split, p in split_paths(task, data_dir).items():
        if p.is_dir():
            raise DataError(f"{p}: is a folder, not the {task.name} {split} file")
    if all(p.is_file() for p in needed):
        return folder
    url = url or URLS[_key(task_name)]
    archive, part = data_dir / f"{task.folder}.zip", data_dir / f"{task.folder}.zip.part"
    reason = None
    created = not data_dir.exists()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        print(f"downloading {url} -> {archive}")
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as f:
            shutil.copyfileobj(response, f)
        os.replace(part, archive)  # named .zip only once complete: an interrupted download is never taken for one
        with tempfile.TemporaryDirectory(dir=data_dir) as tmp, zipfile.ZipFile(archive) as z:
            z.extractall(tmp)  # into the data dir's own disk, so the moves below are plain renames
            # the archive's folder is not always named like the task (QNLIv2.zip): take the shallowest train.tsv
            for src in sorted(Path(tmp).rglob("train.tsv"), key=lambda p: len(p.parts))[:1]:
                folder.mkdir(exist_ok=True)
                for p in src.parent.iterdir():
                    if not (folder / p.name).exists():
                        os.replace(p, folder / p.name)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        reason = f"getting {url} failed ({e})"
    finally:
        if data_dir.is_dir():
            part.unlink(missing_ok=True)
            archive.unlink(missing_ok=True)
            if created and not any(data_dir.iterdir()):
                data_dir.rmdir()  # a mistyped --data-dir leaves nothing behind
    if not all(p.is_file() for p in needed):
        lacking = " and ".join(f"{task.folder}/{p.name}" for p in needed if not p.is_file())
        reason = reason or f"the archive from {url} did not contain {lacking}"
        raise DataError(f"{task.name} data missing: expected {' and '.join(map(str, needed))}; {reason}. "
                        f"Get the GLUE data (e.g. with GLUE's download_glue_data.py) and pass --data-dir or "
                        f"set GLUE_DIR to the folder that holds {task.folder}/")
    return folder


def k_shot(examples, k, seed):
    """k examples of each class, drawn without replacement, in a seeded shuffled order (few-shot runs)."""
    if any(isinstance(e.label, float) for e in examples):
        raise DataError("k_shot is not defined for a regression task (STS-B has no classes)")
    rng = np.random.default_rng(seed)
    chosen = []
    for c in sorted({e.label for e in examples}):
        members = [i for i, e in enumerate(examples) if e.label == c]
        if len(members) < k:
            raise DataError(f"--shots {k}: class {c} has only {len(members)} training examples, fewer than k={k}")
        chosen.extend(rng.choice(members, size=k, replace=False).tolist())
    return [examples[i] for i in rng.permutation(chosen).tolist()]


def holdout_split(examples, fraction, seed):
    """Set aside a seeded, stratified `fraction` of the training examples for model selection, so that
    the dev set is only reported. Strata are the classes, or for regression (STS-B) the five quintiles of
    the score. Returns (train, holdout), each in the original order."""
    if not 0 < fraction < 1:
        raise DataError(f"--holdout {fraction}: must be a fraction strictly between 0 and 1")
    y = np.array([e.label for e in examples])
    strata = y if np.issubdtype(y.dtype, np.integer) else np.argsort(np.argsort(y, kind="stable")) * 5 // len(y)
    rng = np.random.default_rng(seed)
    held = np.zeros(len(y), dtype=bool)
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        held[rng.choice(members, size=round(fraction * len(members)), replace=False)] = True
    if held.all() or not held.any():
        raise DataError(f"--holdout {fraction}: leaves {int(held.sum())} of {len(y)} training examples "
                        "for selection; choose a fraction that leaves both sides non-empty")
    return [e for e, h in zip(examples, held) if not h], [e for e, h in zip(examples, held) if h]


# -----------------------------------------------------------------------------
# tokenising and batching

def load_tokenizer(weights_dir, max_len, cfg=None):
    """The model's own tokenizer.json; its post-processor adds the special tokens and the type ids.
    cfg, the model's model.Config, when given: the tokenizer must fit that model, or the first batch
    would index past an embedding table (or, for RoBERTa, count padding as positions)."""
    from tokenizers import Tokenizer
    path = Path(weights_dir) / "tokenizer.json"
    if path.is_symlink() and not path.exists():  # e.g. a Hugging Face cache snapshot copied without cp -L
        raise DataError(f"{path} is a link to {os.readlink(path)}, which does not exist; copy the file itself (cp -L)")
    if not path.is_file():
        raise DataError(f"tokenizer {'is not a file' if path.exists() else 'not found'}: {path} (a weights folder "
                        "holds config.json, model.safetensors and tokenizer.json; see weights/README.md)")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # the tokenizers library raises a bare Exception
        raise DataError(f"{path}: {_not_a_tokenizer(path, e)}") from None
    try:
        pad = pad_token_id(tok)
    except DataError as e:
        raise DataError(f"{path}: {e}") from None
    if cfg is not None:
        other = "this tokenizer belongs to another model"
        top = max(tok.get_vocab(with_added_tokens=True).values())
        if top >= cfg.vocab_size:
            raise DataError(f"{path}: token ids reach {top}, but the model has {cfg.vocab_size} word embeddings "
                            f"(config.json vocab_size): {other}")
        types = max(tok.encode("a", "b").type_ids)
        if types >= cfg.type_vocab_size:
            raise DataError(f"{path}: gives a sentence pair type id {types}, but the model has {cfg.type_vocab_size} "
                            f"token type embeddings (config.json type_vocab_size): {other}")
        if cfg.model_type == "roberta" and pad != cfg.pad_token_id:
            raise DataError(f"{path}: pads with id {pad}, but the model's pad_token_id is {cfg.pad_token_id} "
                            f"(RoBERTa counts positions past it): {other}")
    specials = tok.num_special_tokens_to_add(is_pair=True)
    if max_len < specials + 2:  # below that, tokenizers silently gives up truncating and returns longer inputs
        raise DataError(f"--max-len {max_len}: too short; the tokenizer adds {specials} special tokens to a sentence "
                        f"pair, so use at least {specials + 2}")
    tok.no_padding()  # tokenizer.json files often pad to a fixed length; batches() pads to the batch's longest
    tok.enable_truncation(max_len, strategy="longest_first")  # trims the longer sentence of a pair first
    return tok


def _not_a_tokenizer(path, error):
    """Why a tokenizer.json did not load, in words: not JSON, JSON of something else, or the library's reason."""
    import json
    try:
        obj = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        return "not a tokenizer: its bytes are not UTF-8 text"
    except json.JSONDecodeError as e:
        return f"not a tokenizer: not valid JSON (line {e.lineno} column {e.colno}: {e.msg})"
    if not (isinstance(obj, dict) and "model" in obj):
        return "valid JSON, but not a tokenizer (a tokenizer.json is an object with a 'model' entry)"
    return f"the tokenizers library cannot read it ({str(error).splitlines()[0] if str(error) else type(error).__name__})"


def pad_token_id(tok):
    for t in ("[PAD]", "<pad>"):  # BERT-style, RoBERTa-style
        if tok.token_to_id(t) is not None:
            return tok.token_to_id(t)
    raise DataError("tokenizer has neither a [PAD] nor a <pad> token")


def encode(tok, examples):
    """Examples -> list of (ids, type_ids), unpadded."""
    inputs = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
    return [(enc.ids, enc.type_ids) for enc in tok.encode_batch(inputs)]


def batches(encoded, labels, batch_size, pad_id, shuffle=False, seed=0, epoch=0):
    """Dicts of (B, T) long tensors padded to the batch's longest example, and labels (B,) unless labels is None.
    The last, smaller batch is kept, so an epoch serves every example exactly once."""
    if labels is not None:  # class indices -> long; STS-B scores -> float32 for the regression loss
        labels = torch.as_tensor(labels)
        labels = labels.float() if labels.is_floating_point() else labels.long()
    # seeded by (seed, epoch): a rerun repeats exactly, and each epoch gets its own order
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(len(encoded), generator=g) if shuffle else torch.arange(len(encoded))
    for start in range(0, len(encoded), batch_size):
        idx = order[start:start + batch_size].tolist()
        B, T = len(idx), max(len(encoded[i][0]) for i in idx)
        input_ids = torch.full((B, T), pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((B, T), dtype=torch.long)
        attention_mask = torch.zeros((B, T), dtype=torch.long)  # 1 for real tokens, 0 for padding
        for b, i in enumerate(idx):
            ids, types = encoded[i]
            input_ids[b, :len(ids)] = torch.tensor(ids)
            token_type_ids[b, :len(ids)] = torch.tensor(types)
            attention_mask[b, :len(ids)] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if labels is not None:
            batch["labels"] = labels[idx]
        yield batch


# -----------------------------------------------------------------------------
# metrics: preds are class indices (after argmax) or, for STS-B, predicted scores

def accuracy(preds, labels):
    return float(np.mean(np.asarray(preds) == np.asarray(labels)))


def _confusion(preds, labels):
    p, y = np.asarray(preds) == 1, np.asarray(labels) == 1
    return np.sum(p & y), np.sum(p & ~y), np.sum(~p & y), np.sum(~p & ~y)  # tp, fp, fn, tn


def f1(preds, labels):
    """Binary F1 of the positive class 1: 2tp / (2tp + fp + fn)."""
    tp, fp, fn, _ = _confusion(preds, labels)
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews(preds, labels):
    """Binary Matthews correlation; 0 when a row or column of the confusion matrix is empty (sklearn does so)."""
    tp, fp, fn, tn = (float(v) for v in _confusion(preds, labels))
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denom) if denom else 0.0


def pearson(x, y):
    """Pearson correlation; 0 (not nan) for a constant series, so an early constant model still logs a number."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denom) if denom else 0.0


def _ranks(x):
    """1-based ranks; tied values share the mean of the ranks they span."""
    _, inverse, counts = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # a group of tied values spans ranks ends - counts + 1 ... ends
    return ((ends - counts + 1 + ends) / 2)[inverse]


def spearman(x, y):
    return pearson(_ranks(x), _ranks(y))


METRICS = {"accuracy": accuracy, "f1": f1, "matthews": matthews, "pearson": pearson, "spearman": spearman}


def compute_metrics(task_name, preds, labels):
    """The task's metrics by name, and the paper's one again under 'metric'."""
    task = get_task(task_name)
    out = {m: METRICS[m](preds, labels) for m in task.metrics}
    out["metric"] = out[task.metrics[0]]
    return out

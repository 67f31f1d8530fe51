"""Data for fine-tuning: the tasks, their files, samples of them, and the batches a model reads.

  GLUE        the eight tasks the AD-DROP paper fine-tunes on (Table 1): SST-2, MNLI, QNLI, QQP, CoLA, STS-B,
              MRPC, RTE, and WNLI for a complete test-server submission; read from GLUE's TSV files, which
              download.py fetches when they are missing
  CoNLL-2003  English NER, the token task (Appendix A): one tag per word; its files are put in place by hand
  PAWS        paraphrase pairs, the out-of-distribution test of MRPC models; put in place by hand too
  sampling    k-shot sets, stratified subsamples and hold-out splits, each seeded
  tokenising  the model's own tokenizer.json, then padded (B, T) batches
  a run's     load_splits: what train.py reads, samples and tokenises before its first step

The readers of the files, which name the file and line of any row that does not fit, are in support/formats.py;
the scores and the prediction files in support/metrics.py.
"""
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from addrop import IGNORE  # -100, the label of a sub-token no loss, metric or attribution scores
from support import download
from support.formats import SCORE_RANGE, DataError, Example, read_conll, read_test_tsv, read_tsv  # noqa: F401


@dataclass(frozen=True)
class Task:
    name: str                      # as the paper and GLUE print it
    folder: str                    # subfolder of the data dir, named as GLUE's download script names it
    text_a: str                    # column of the first (or only) sentence
    text_b: str | None             # column of the second sentence; None for single-sentence tasks
    label_col: str                 # column of the gold label
    labels: tuple[str, ...] | None  # label strings; a label is stored as its index here. None: regression
    metrics: tuple[str, ...]       # what metrics.compute_metrics reports; the first is the paper's metric
    columns: tuple[str, ...] | None = None  # None: the first line is a header; else there is none: these name
    #                                          the columns (CoLA)
    dev_file: str = "dev.tsv"
    token_level: bool = False      # one label per word (NER) rather than one per example
    test_files: tuple[tuple[str, str], ...] = (("test", "test.tsv"),)  # (split, file) of the unlabelled test sets


BINARY = ("0", "1")
NLI2 = ("entailment", "not_entailment")
TASKS = {
    "sst2": Task("SST-2", "SST-2", "sentence", None, "label", BINARY, ("accuracy",)),
    "mnli": Task("MNLI", "MNLI", "sentence1", "sentence2", "gold_label",
                 ("contradiction", "entailment", "neutral"), ("accuracy",), dev_file="dev_matched.tsv",
                 test_files=(("test", "test_matched.tsv"), ("test_mismatched", "test_mismatched.tsv"),
                             ("diagnostic", "../diagnostic/diagnostic.tsv"))),  # GLUE's AX: scored by MNLI models
    "qnli": Task("QNLI", "QNLI", "question", "sentence", "label", NLI2, ("accuracy",)),
    "qqp": Task("QQP", "QQP", "question1", "question2", "is_duplicate", BINARY, ("accuracy", "f1")),
    "cola": Task("CoLA", "CoLA", "sentence", None, "label", BINARY, ("matthews", "accuracy"),
                 columns=("source", "label", "original_label", "sentence")),
    "stsb": Task("STS-B", "STS-B", "sentence1", "sentence2", "score", None, ("pearson", "spearman")),
    "mrpc": Task("MRPC", "MRPC", "#1 String", "#2 String", "Quality", BINARY, ("accuracy", "f1")),
    "rte": Task("RTE", "RTE", "sentence1", "sentence2", "label", NLI2, ("accuracy",)),
    # not in the paper; here so that a GLUE submission can be complete (WNLI.tsv). Labels 1 entailment, 0 not.
    "wnli": Task("WNLI", "WNLI", "sentence1", "sentence2", "label", BINARY, ("accuracy",)),
}
# CoNLL-2003 English NER, the one token-level task: IOB2 tags in Hugging Face's conll2003 order, so that a tag index
# means the same here as there. It has no URL below: there is no stable download, the files are put there by hand.
CONLL_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
TASKS["conll2003"] = Task("CoNLL-2003", "conll2003", text_a="word", text_b=None, label_col="ner", labels=CONLL_TAGS,
                          metrics=("f1", "precision", "recall", "accuracy"), token_level=True, dev_file="dev.txt")
# PAWS-Wiki Labeled (Final), paraphrase pairs built by word swapping (Zhang et al., 2019): the out-of-distribution
# test of MRPC-trained models (train.py --ood paws). Its labelled dev.tsv and test.tsv (8000 pairs each, CRLF line
# ends, header id sentence1 sentence2 label) sit in data_dir/paws/ or beside the GLUE folder, like CoNLL-2003;
# there is no train.tsv there and no URL: the files are put there by hand. Labels as MRPC's: 1 paraphrase, 0 not.
TASKS["paws"] = Task("PAWS", "paws", "sentence1", "sentence2", "label", BINARY, ("accuracy", "f1"), test_files=())


# The file names GLUE's server expects in a submission zip, and the test split each is made from: with these
# eleven a submission is complete. AX.tsv is GLUE's diagnostic set labelled by the MNLI model; WNLI is not in the paper.
SUBMISSION_FILES = {
    "sst2": [("SST-2.tsv", "test")], "cola": [("CoLA.tsv", "test")], "stsb": [("STS-B.tsv", "test")],
    "mrpc": [("MRPC.tsv", "test")], "qqp": [("QQP.tsv", "test")], "qnli": [("QNLI.tsv", "test")],
    "rte": [("RTE.tsv", "test")], "wnli": [("WNLI.tsv", "test")],
    "mnli": [("MNLI-m.tsv", "test"), ("MNLI-mm.tsv", "test_mismatched"), ("AX.tsv", "diagnostic")],
}


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


def token_task_folder(task, data_dir):
    """Where a token task's files are: data_dir/conll2003/ if that exists, else conll2003/ beside data_dir, so that
    --data-dir DATA/glue (the GLUE folder, which the other tasks need) finds DATA/conll2003 next to it."""
    inside = Path(data_dir) / task.folder
    return inside if inside.exists() else Path(data_dir).parent / task.folder


def split_paths(task, data_dir):
    if task.token_level:
        folder = token_task_folder(task, data_dir)
        return {"train": folder / "train.txt", "dev": folder / task.dev_file, "test": folder / "test.txt"}
    if task == TASKS["paws"]:  # found as CoNLL-2003 is; its test.tsv is labelled (the set that is reported)
        folder = token_task_folder(task, data_dir)
        return {"train": folder / "train.tsv", "dev": folder / "dev.tsv", "test": folder / "test.tsv"}
    folder = Path(data_dir) / task.folder
    return {"train": folder / "train.tsv", "dev": folder / task.dev_file,
            **{split: Path(os.path.normpath(folder / file)) for split, file in task.test_files}}  # see load_test


def load_split(task_name, split, data_dir):
    """Examples of one split ('train' or 'dev', and 'test' for CoNLL-2003; for MNLI 'dev' is dev_matched).
    Reads only; see ensure_task. GLUE's test splits have no labels: load_test reads them."""
    task = get_task(task_name)
    if not task.token_level and split in dict(task.test_files):
        raise DataError(f"the {task.name} {split} split has no labels: read it with data.load_test, which returns "
                        "(indices, examples) for metrics.write_glue_submission")
    path = _split_file(task, split, data_dir)
    return read_conll(path, CONLL_TAGS) if task.token_level else read_tsv(path, task)


def load_test(task_name, split, data_dir):
    """(indices, examples) of a GLUE test set, 'test' (for MNLI test_matched), MNLI's 'test_mismatched', or
    'diagnostic' (GLUE's AX set, data_dir/diagnostic/diagnostic.tsv, which MNLI models label), each example's
    label None: what metrics.write_glue_submission needs. The test files come in GLUE's archives with train
    and dev."""
    task = get_task(task_name)
    if task.token_level or split not in dict(task.test_files):
        raise DataError(f"{task.name} has no unlabelled test split {split!r}"
                        + ("" if task.token_level else f"; it has {' and '.join(map(repr, dict(task.test_files)))}"))
    return read_test_tsv(_split_file(task, split, data_dir), task)


def _split_file(task, split, data_dir):
    """The file of one split, refused by name if it is not there."""
    paths = split_paths(task, data_dir)
    if split not in paths:
        raise DataError(f"unknown split {split!r}; expected {' or '.join(map(repr, paths))}")
    if paths[split].is_dir():
        raise DataError(f"{paths[split]}: is a folder, not the {task.name} {split} file")
    if not paths[split].is_file():
        if task.token_level:
            where = f"put {paths[split].name} in {Path(data_dir) / task.folder}/ or in {Path(data_dir).parent / task.folder}/"
        elif split == "diagnostic":
            where = f"it is not in MNLI's archive: download {download.GLUE_URL}AX.tsv to that path"
        else:
            where = f"pass --data-dir or set GLUE_DIR to the folder that holds {task.folder}/"
        raise DataError(f"{task.name} {split} file not found: {paths[split]} ({where})")
    return paths[split]


class Split(NamedTuple):
    examples: list  # Example
    enc: list       # (ids, type_ids) per example, unpadded
    y: list         # per example a label, a score, or (token tasks) a label per sub-token


def load_splits(args, task, weights, cfg, max_len, say=print):
    """What a run reads, from train.py's flags: train, dev and holdout (maybe empty), sampled as --shots, --limit,
    --dev-limit and --holdout say; ood (PAWS) with --ood; with --predict the test sets (GLUE's unlabelled ones go
    to submission files), each tokenised. Returns the splits (name -> Split), each GLUE test split's index
    column, and the padding token."""
    data_dir = resolve_data_dir(args.data_dir)
    download.ensure_task(args.task, data_dir)
    train_ex, dev_ex, hold_ex = load_split(args.task, "train", data_dir), load_split(args.task, "dev", data_dir), []
    if args.shots and args.shots_holdout:  # K per class to train on, K others to pick the epoch
        train_ex, hold_ex = k_shot_split(train_ex, args.shots, args.seed)
    elif args.shots:
        train_ex = k_shot(train_ex, args.shots, args.seed)
    sample = (lambda ex, n, seed: ex[:n]) if args.limit_first else subsample
    if args.limit:  # a seeded, stratified random sample: the same for every method under one seed
        train_ex = sample(train_ex, args.limit, args.seed)
    if args.dev_limit:
        dev_ex = sample(dev_ex, args.dev_limit, args.seed)
    if args.holdout:
        train_ex, hold_ex = holdout_split(train_ex, args.holdout, args.seed)
    parts = {"train": train_ex, "holdout": hold_ex, "dev": dev_ex}
    if args.ood:
        parts["ood"] = load_split(args.ood, "test", data_dir)
    test_index = {}
    if args.predict and task.token_level:  # conlleval's files hold every sentence, whatever --dev-limit sampled
        parts["test"] = load_split(args.task, "test", data_dir)
        if args.dev_limit:  # (without it, dev is all of dev)
            parts["dev_all"] = load_split(args.task, "dev", data_dir)
    elif args.predict:
        for _, split in SUBMISSION_FILES[args.task]:
            test_index[split], parts[split] = load_test(args.task, split, data_dir)
    tok = load_tokenizer(weights, max_len, cfg)  # refuses a tokenizer of another model
    splits = {}
    for name, examples in parts.items():
        enc, y = encode(tok, examples)
        splits[name] = Split(examples, enc, y)
        if task.token_level and examples:  # no word vanishes from scoring: a cut word counts as predicted O
            words, sentences = words_cut(examples, y)
            if words:
                say(f"{name}: --max-len {max_len} cuts {words} words in {sentences} sentences; "
                    f"they are scored as predicted O")
    return splits, test_index, pad_token_id(tok)


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


def k_shot_split(examples, k, seed):
    """The few-shot convention of LM-BFF (Gao et al. 2021): k training examples per class, exactly those of
    k_shot(examples, k, seed), and k other examples per class held out to pick the epoch, drawn from the rest
    with their own stream (seed, 2). Returns (train, holdout)."""
    train = k_shot(examples, k, seed)
    taken = {id(e) for e in train}  # by identity: SST-2 repeats some sentences, and each copy is its own example
    rest = [e for e in examples if id(e) not in taken]
    try:
        return train, k_shot(rest, k, [seed, 2])
    except DataError:
        raise DataError(f"--shots {k} --shots-holdout: a class has fewer than {2 * k} training examples, "
                        f"too few for {k} to train on and {k} to hold out") from None


def _strata(examples):
    """The stratum of each example, for stratified sampling: its class, or for regression (STS-B) the quintile
    of its score (0-4, by rank). A token task's example has a tag per word and no class: one stratum."""
    if examples and isinstance(examples[0].label, tuple):
        return np.zeros(len(examples), dtype=int)
    y = np.array([e.label for e in examples])
    return y if np.issubdtype(y.dtype, np.integer) else np.argsort(np.argsort(y, kind="stable")) * 5 // len(y)


def subsample(examples, n, seed):
    """A seeded random sample of n examples, stratified like holdout_split (classes, or STS-B's score quintiles),
    returned in the original order; all of them when n >= len(examples).
    Each stratum's count is within one of its proportional share n * N_s / N (for two classes always; for five
    near-equal quintiles too), and the samples are nested: under one seed, the sample of n is part of the sample
    of any larger n, so that runs on 1000 and on 2000 examples differ only by the added 1000. Both come from one
    ordering: each stratum's members in a seeded random order, the r-th of N_s at key (r + 1/2) / N_s, all
    examples sorted by key (seeded ties), the first n taken (Sainte-Lague's divisor method, which never takes a
    seat away when the house grows). Its own random stream (seed, 1): not holdout_split's, which then splits it."""
    if n >= len(examples):
        return list(examples)
    rng = np.random.default_rng([seed, 1])
    strata = _strata(examples)
    key = np.empty(len(examples))
    for s in np.unique(strata):
        members = rng.permutation(np.flatnonzero(strata == s))
        key[members] = (np.arange(len(members)) + 0.5) / len(members)
    first = np.lexsort((rng.random(len(examples)), key))[:n]  # by key, ties (equal-sized strata) at random
    return [examples[i] for i in np.sort(first)]


def holdout_split(examples, fraction, seed):
    """Set aside a seeded, stratified `fraction` of the training examples for model selection, so that
    the dev set is only reported. Strata are the classes, or for regression (STS-B) the five quintiles of
    the score. Returns (train, holdout), each in the original order."""
    if not 0 < fraction < 1:
        raise DataError(f"--holdout {fraction}: must be a fraction strictly between 0 and 1")
    strata = _strata(examples)
    rng = np.random.default_rng(seed)
    held = np.zeros(len(examples), dtype=bool)
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        held[rng.choice(members, size=round(fraction * len(members)), replace=False)] = True
    if held.all() or not held.any():
        raise DataError(f"--holdout {fraction}: leaves {int(held.sum())} of {len(examples)} training examples "
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
    """Examples -> (encoded, labels): encoded a list of (ids, type_ids), unpadded, and one label entry per example.
    A sentence task's entry is the example's label. A token task's (text_a a tuple of words) is a list with one
    entry per sub-token: the word's tag index on its first sub-token, IGNORE on its other pieces and on the special
    tokens, so that each word is scored exactly once (BERT's NER recipe; Hugging Face's run_ner does the same).
    A word whose first sub-token the truncation to max_len cut gets no label at all; words_cut counts them."""
    if not examples:
        return [], []
    if not isinstance(examples[0].text_a, tuple):
        inputs = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
        return [(enc.ids, enc.type_ids) for enc in tok.encode_batch(inputs)], [e.label for e in examples]
    space = " " if byte_level(tok) else ""
    encodings = tok.encode_batch([[space + w for w in e.text_a] for e in examples], is_pretokenized=True)
    labels = []
    for n, (e, enc) in enumerate(zip(examples, encodings)):
        row, prev = [], None
        for w in enc.word_ids:  # None for [CLS] and [SEP], else the index of the word this piece belongs to
            row.append(IGNORE if w is None or w == prev else e.label[w])
            prev = w
        # only a tail of words may go unlabelled (cut), or metrics.word_predictions would give words the wrong
        # predictions
        labelled = [w for w, y in zip(enc.word_ids, row) if y != IGNORE]
        if labelled != list(range(len(labelled))):
            w = next(i for i, v in enumerate(labelled) if v != i)
            raise DataError(f"sentence {n}: word {w} ({e.text_a[w]!r}) is no sub-token at all after the tokenizer's "
                            "normalisation, so it cannot carry its tag; remove or replace it")
        labels.append(row)
    return [(enc.ids, enc.type_ids) for enc in encodings], labels


def byte_level(tok):
    """Whether tok is byte-level BPE (RoBERTa's), which reads a word's leading space as the mark of a word start
    ("Ġrejects"). Pretokenized words carry no space, so encode gives each one, as Hugging Face's
    add_prefix_space=True does; without it every word would be split as if it went on the previous one ("rej",
    "ects"), pieces pretraining never saw at a word start. WordPiece (BERT, ELECTRA) drops the space anyway."""
    pre = json.loads(tok.to_str()).get("pre_tokenizer") or {}
    return any(p.get("type") == "ByteLevel" for p in [pre, *pre.get("pretokenizers", [])])


def words_cut(examples, labels):
    """(words, sentences): how many words of a token task were left without a label by the truncation to max_len
    (labels as encode returns them), and how many sentences lost any."""
    cut = [len(e.text_a) - sum(y != IGNORE for y in row) for e, row in zip(examples, labels, strict=True)]
    return sum(cut), sum(c > 0 for c in cut)


def batches(encoded, labels, batch_size, pad_id, shuffle=False, seed=0, epoch=0, group_by_length=False, pad_to=None):
    """Dicts of (B, T) long tensors padded to the batch's longest example (to pad_to tokens when given: one static
    shape, for a compiled model); labels unless labels is None: (B,) for a
    sentence task, (B, T) padded with IGNORE for a token task (a list per example, from encode); and index (B,),
    the positions in `encoded` of the batch's examples, to put predictions back in order.
    The last, smaller batch is kept, so an epoch serves every example exactly once. With pad_to (--compile), it
    is filled to batch_size rows with copies of its own first rows, so that every batch has one static shape (no
    recompile for the last one): then real (B,) bool marks the batch's own examples, False for a copy, which
    counts in no loss, metric or attribution (a token task's copy has only IGNORE labels), and index is -1 there.
    group_by_length batches examples of similar length together, so that less of each batch is padding, like
    Hugging Face's group_by_length: shuffled, a seeded permutation is cut into mega-batches of 50 batches, each is
    sorted longest first and cut into batches, and then the order of all the batches is shuffled (Hugging Face
    instead keeps the mega-batches' order and moves the longest batch to the front). Not shuffled (evaluation),
    all the examples are sorted longest first, ties in their original order."""
    token_labels = labels is not None and len(labels) > 0 and isinstance(labels[0], (list, tuple))
    if labels is not None and not token_labels:  # class indices -> long; STS-B scores -> float32 for the regression loss
        labels = torch.as_tensor(labels)
        labels = labels.float() if labels.is_floating_point() else labels.long()
    # seeded by (seed, epoch): a rerun repeats exactly, and each epoch gets its own order
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    n, lengths = len(encoded), [len(ids) for ids, _ in encoded]
    if not group_by_length:
        order = torch.randperm(n, generator=g).tolist() if shuffle else list(range(n))
        groups = [order[s:s + batch_size] for s in range(0, n, batch_size)]
    elif shuffle:
        perm, mega = torch.randperm(n, generator=g).tolist(), 50 * batch_size
        groups = []
        for s in range(0, n, mega):
            chunk = sorted(perm[s:s + mega], key=lambda i: -lengths[i])
            groups += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
        groups = [groups[j] for j in torch.randperm(len(groups), generator=g).tolist()]
    else:
        order = sorted(range(n), key=lambda i: -lengths[i])  # sorted is stable
        groups = [order[s:s + batch_size] for s in range(0, n, batch_size)]
    for idx in groups:
        own = len(idx)
        if pad_to:  # one static shape: the last batch filled with copies of its own rows
            idx = idx + [idx[k % own] for k in range(batch_size - own)]
        B, T = len(idx), pad_to or max(lengths[i] for i in idx)
        input_ids = torch.full((B, T), pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((B, T), dtype=torch.long)
        attention_mask = torch.zeros((B, T), dtype=torch.long)  # 1 for real tokens, 0 for padding
        for b, i in enumerate(idx):
            ids, types = encoded[i]
            input_ids[b, :len(ids)] = torch.tensor(ids)
            token_type_ids[b, :len(ids)] = torch.tensor(types)
            attention_mask[b, :len(ids)] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if token_labels:
            batch["labels"] = torch.full((B, T), IGNORE, dtype=torch.long)  # padding is never scored
            for b, i in enumerate(idx[:own]):
                batch["labels"][b, :len(labels[i])] = torch.tensor(labels[i], dtype=torch.long)
        elif labels is not None:
            batch["labels"] = labels[idx]
        batch["index"] = torch.tensor(idx[:own] + [-1] * (B - own), dtype=torch.long)
        if pad_to:
            batch["real"] = torch.arange(B) < own
        yield batch

"""
Scores and prediction files, for GLUE, CoNLL-2003 and PAWS (the tasks of data.py).

Metrics follow the paper: Matthews correlation for CoLA, Pearson for STS-B (Spearman besides), accuracy for the
rest (F1 besides for MRPC, QQP and PAWS), and for CoNLL-2003 entity-level F1 as conlleval computes it. They are
written out in numpy, so there is nothing to install. preds are class indices (after argmax) or, for STS-B,
predicted scores; a token task's are per-word tag sequences (word_predictions makes them from sub-token ones).
The prediction files: GLUE's test-server TSVs and conlleval's input, each written through atomic_write.
"""

import numpy as np

from addrop import IGNORE  # -100, the label of a sub-token no loss, metric or attribution scores
from support.checkpoint import atomic_write
from data import CONLL_TAGS, SCORE_RANGE, SUBMISSION_FILES, DataError, get_task

# -----------------------------------------------------------------------------
# metrics

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


def _tag_names(tags):
    return [t if isinstance(t, str) else CONLL_TAGS[int(t)] for t in tags]  # int(): numpy and torch integers too


def conll_chunks(tags):
    """The entity chunks of one sentence's IOB2 tags (strings, or indices into CONLL_TAGS) as a set of
    (type, start, end), end exclusive like a slice, by conlleval's rules: a chunk starts at B-X, or at an I-X that
    follows O, a tag of another type, or nothing (sentence start); it runs on while the next tag is I-X of the same
    type, so a B-X right after an I-X starts a new chunk."""
    tags = _tag_names(tags)
    chunks, kind, start = set(), None, 0  # kind: the type of the chunk that is open, None when none is
    for i, tag in enumerate(tags + ["O"]):  # the O closes a chunk still open at the end
        prefix, _, typ = tag.partition("-")
        if kind is not None and not (prefix == "I" and typ == kind):
            chunks.add((kind, start, i))
            kind = None
        if prefix == "B" or (prefix == "I" and kind is None):
            kind, start = typ, i
    return chunks


def entity_scores(preds, labels):
    """Micro precision, recall and F1 over entity chunks (right only when type, start and end all agree), as
    conlleval and seqeval compute them, and accuracy over all words. preds and labels hold one tag sequence
    per sentence. With no predicted chunk, precision is 0 (conlleval prints 0.00 there too), not a NaN."""
    tp = n_pred = n_gold = right = words = 0
    for p, y in zip(preds, labels, strict=True):
        p, y = _tag_names(p), _tag_names(y)
        if len(p) != len(y):
            raise ValueError(f"a sentence has {len(y)} gold tags but {len(p)} predicted ones")
        P, Y = conll_chunks(p), conll_chunks(y)
        tp, n_pred, n_gold = tp + len(P & Y), n_pred + len(P), n_gold + len(Y)
        right += sum(a == b for a, b in zip(p, y))
        words += len(y)
    return {"precision": tp / n_pred if n_pred else 0.0, "recall": tp / n_gold if n_gold else 0.0,
            "f1": 2 * tp / (n_pred + n_gold) if tp else 0.0,  # = 2PR / (P + R)
            "accuracy": right / words if words else 0.0}


METRICS = {"accuracy": accuracy, "f1": f1, "matthews": matthews, "pearson": pearson, "spearman": spearman}


def compute_metrics(task_name, preds, labels):
    """The task's metrics by name, and the paper's one again under 'metric'. For a token task (CoNLL-2003) preds
    and labels are per-word tag sequences, one per sentence, and the metrics are entity_scores'."""
    task = get_task(task_name)
    if len(preds) != len(labels):  # numpy would broadcast one against the other without a word
        raise ValueError(f"{task_name}: {len(preds)} predictions for {len(labels)} labels")
    if task.token_level:
        out = entity_scores(preds, labels)
    else:
        out = {m: METRICS[m](preds, labels) for m in task.metrics}
    out["metric"] = out[task.metrics[0]]
    return out

# -----------------------------------------------------------------------------
# GLUE's test server: one file of predictions per test set, named as data.SUBMISSION_FILES says

def write_glue_submission(path, task_name, indices, preds):
    """One test set's predictions in GLUE's submission format: the header 'index<TAB>prediction', then a row per
    test example with its index from the test file (data.load_test). preds are what compute_metrics takes: a class
    index is written as the task's label string (GLUE expects 'entailment', not 0), an STS-B score clipped to
    [0, 5] with 3 decimals. Written through atomic_write: a full disk leaves the previous file whole."""
    task = get_task(task_name)
    preds = np.asarray(preds)
    if preds.ndim != 1 or len(preds) != len(indices):
        raise DataError(f"{path}: {len(indices)} test examples, but predictions of shape {preds.shape}")
    if task.labels is None:
        if not np.isfinite(preds).all():
            raise DataError(f"{path}: predicted score {preds[~np.isfinite(preds)][0]} is not a finite number")
        cells = [f"{s:.3f}" for s in np.clip(preds.astype(np.float64), *SCORE_RANGE) + 0.0]  # + 0.0: no "-0.000"
    else:
        if len(preds) and not (np.issubdtype(preds.dtype, np.integer) and 0 <= preds.min() and
                               preds.max() < len(task.labels)):
            raise DataError(f"{path}: predictions must be class indices 0 to {len(task.labels) - 1} "
                            f"(of {task.labels}), got {preds.dtype} values {preds.min()} to {preds.max()}")
        cells = [task.labels[c] for c in preds]
    text = "index\tprediction\n" + "".join(f"{i}\t{c}\n" for i, c in zip(indices, cells))
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

# -----------------------------------------------------------------------------
# token tasks: from sub-token predictions back to words, and conlleval's input file

def word_predictions(token_preds, labels, examples):
    """Per-sub-token predicted tag indices (one row per example, padded or not, aligned with labels from encode)
    -> per-word tag sequences. A word's prediction is the one at its first sub-token, where encode put its label;
    the words truncation cut have no sub-token left and are predicted O (index 0), so they count against recall."""
    out = []
    for p, y, e in zip(token_preds, labels, examples, strict=True):
        first = [int(t) for t, lab in zip(p, y) if lab != IGNORE]  # zip stops at the shorter: padding drops out
        out.append(first + [0] * (len(e.text_a) - len(first)))
    return out


def write_conll_predictions(path, examples, preds):
    """`word gold predicted` per line, tag names, a blank line after each sentence: the file conlleval reads
    (it takes the last two columns as gold and predicted). Written through atomic_write: a full disk leaves the
    previous file whole."""
    lines = []
    for e, p in zip(examples, preds, strict=True):
        lines += [f"{w} {CONLL_TAGS[y]} {CONLL_TAGS[int(t)]}\n" for w, y, t in zip(e.text_a, e.label, p, strict=True)]
        lines.append("\n")
    atomic_write(path, lambda tmp: tmp.write_text("".join(lines), encoding="utf-8", newline="\n"))

# -----------------------------------------------------------------------------
# train.py --predict: the prediction files, written with the best epoch's weights

def predict(j, evaluate):
    """train.py --predict, with the best epoch's weights of run j (evaluate: train.evaluate, which scores a
    split): CoNLL-2003 writes OUT/dev_predictions.txt and OUT/test_predictions.txt (`word gold predicted`,
    conlleval's input), every sentence of both files even when --dev-limit sampled dev for the epochs, and scores
    both; a GLUE task writes the files GLUE's server takes (OUT/RTE.tsv, ...). Returns each labelled split's
    metrics."""
    scores = {}
    dev = "dev_all" if "dev_all" in j.splits else "dev"  # all of dev, which --dev-limit sampled
    files = [("dev_predictions.txt", dev), ("test_predictions.txt", "test")] if j.token_level \
        else SUBMISSION_FILES[j.args.task]
    for name, split in files:
        s = j.splits[split]
        _, split_scores, preds = evaluate(j, s)
        if split_scores:
            scores[split.removesuffix("_all")] = split_scores
        if j.master and j.token_level:
            write_conll_predictions(j.out / name, s.examples, preds)
        elif j.master:
            write_glue_submission(j.out / name, j.args.task, j.test_index[split], preds)
        j.say(f"{split.removesuffix('_all')}: predictions in {j.out / name}")
    return scores

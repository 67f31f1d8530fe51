"""
The explorer's numbers, without the page: a model loaded once, a sentence's attribution computed once per
(sentence, method, layer), and for each p, q and seed a redrawn mask and a masked forward.

Every number comes from the project's own functions: the model's forward (model.Model), addrop.attribute for
B, addrop.drop_mask and addrop.random_mask for the masks, train.loss_sum for the loss. Attribution depends on
neither p nor q, so a move of p, q or the seed costs one drop_mask and one forward (milliseconds); a new
sentence or method costs one attribution. app.py draws what `explore` returns and adds nothing to it.

Bad input (an empty sentence, an unknown or broken model folder, a model for another task) raises Problem,
whose message the page shows in place of the maps.
"""

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

import addrop
from support import checkpoint
import data
import train

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL_MODEL = "runs/tutorial/model"  # where tutorial.ipynb keeps its trained model (relative to ROOT)
MAX_LEN = 64       # tokens a sentence (pair) is cut to, as in the tutorial: a 64 x 64 map still reads on a screen
IG_STEPS = 20      # m of Eq. 3, the paper's
FALLBACK_SEED = 0  # the fresh head of the fallback model is drawn from this seed, so that every start shows the same
READABLE = {"sst2": ("negative", "positive"), "cola": ("unacceptable", "acceptable"),
            "mrpc": ("not equivalent", "equivalent"), "qqp": ("not duplicate", "duplicate"),
            "wnli": ("not entailment", "entailment")}  # tasks whose labels are stored as "0" and "1"


class Problem(Exception):
    """Something the student typed or chose that the explorer cannot show; the message says what and what to do."""

# -----------------------------------------------------------------------------
# the model

@dataclass
class Loaded:
    net: torch.nn.Module
    tok: object                 # a tokenizers.Tokenizer, cut to MAX_LEN
    classes: tuple              # a name per output of the head
    name: str                   # the folder as the student gave it (or the fallback's words)
    task: str | None            # the task the folder was trained for, None when not known
    note: str = ""              # what the page should say about this model (a fresh head, a pair task, ...)
    cache: OrderedDict = field(default_factory=OrderedDict)  # (text_a, text_b, method, layer) -> B (1, H, T, T)


def load(folder=None):
    """A Loaded model: `folder` (a train.py output folder, or any weights folder), or with None or "" the
    tutorial's trained model, or where that is missing the installed all-MiniLM-L6-v2 with a fresh, seeded head.
    Raises Problem, in words, for a folder that is missing, broken, or trained for a task the explorer cannot show."""
    folder = (folder or "").strip()
    if not folder and (ROOT / TUTORIAL_MODEL / "model.safetensors").is_file():
        folder = TUTORIAL_MODEL
    if not folder:
        return _fallback()
    d = Path(folder) if Path(folder).is_absolute() else ROOT / folder
    try:
        config = json.loads((d / "config.json").read_text()) if (d / "config.json").is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Problem(f"model folder {folder}: config.json cannot be read ({e})") from None
    if not isinstance(config, dict):
        raise Problem(f"model folder {folder}: config.json is not a JSON object")
    task, labels, num_labels = _classifier_of(folder, config)
    try:
        with torch.random.fork_rng():  # a head the folder lacks starts fresh: the same one at every start
            torch.manual_seed(FALLBACK_SEED)
            net = checkpoint.from_pretrained(d, num_labels).eval()
        tok = data.load_tokenizer(d, MAX_LEN, net.cfg)
    except (checkpoint.WeightsError, data.DataError) as e:
        raise Problem(f"model folder {folder}: {e}") from None
    classes = READABLE.get(task) or labels or tuple(f"class {k}" for k in range(num_labels))
    note = ""
    if task is None:
        note = (f"`{folder}` names no task (not a train.py output folder): its classes go unnamed, and if it "
                "holds no classifier, the head is fresh and its predictions meaningless.")
    elif data.get_task(task).text_b is not None:
        note = f"This model was trained on {data.get_task(task).name}, sentence pairs: type both sentences."
    return Loaded(net, tok, tuple(classes), folder, task, note)


def _fallback():
    """No folder and no tutorial model: the installed all-MiniLM-L6-v2 with a fresh head, the same at every start."""
    try:
        weights = checkpoint.default_weights_dir()
    except checkpoint.WeightsError as e:
        raise Problem(f"{TUTORIAL_MODEL}/ is missing and {e}") from None
    with torch.random.fork_rng():  # the fresh head's init, the same at every start, the caller's stream untouched
        torch.manual_seed(FALLBACK_SEED)
        net = checkpoint.from_pretrained(weights, 2).eval()
    note = (f"**No trained model:** `{TUTORIAL_MODEL}/` is missing (run the tutorial's first cells to make it), "
            "so this is the pretrained all-MiniLM-L6-v2 with a **freshly initialised head** (seed "
            f"{FALLBACK_SEED}). Its predictions are meaningless, but A, B and the masks are computed as for a "
            "trained model.")
    return Loaded(net, data.load_tokenizer(weights, MAX_LEN, net.cfg), ("class 0", "class 1"),
                  "all-MiniLM-L6-v2 (fresh head)", None, note)


def _classifier_of(folder, config):
    """(task, labels, num_labels) of a model folder's config.json: task None for a folder from elsewhere, labels
    the task's class names (None: not known). Raises Problem for a model the explorer cannot show: a token task's,
    a regressor, an unknown task, fewer than two classes, or a class count that does not match the task's."""
    task, heads = config.get("task"), config.get("architectures") or []
    if any(isinstance(a, str) and a.endswith("ForTokenClassification") for a in heads) or (
            isinstance(task, str) and task in data.TASKS and data.get_task(task).token_level):
        raise Problem(f"model folder {folder} was trained for {task or 'a token task'}: a label per token (NER). The "
                      "explorer shows sentence classifiers, whose one logit per class the attribution explains; "
                      "choose a model trained on a GLUE classification task.")
    if task is not None and task not in data.TASKS:
        raise Problem(f"model folder {folder}: config.json names the task {task!r}, which this project does not know")
    labels = data.get_task(task).labels if task else None
    if task and labels is None:
        raise Problem(f"model folder {folder} was trained for {task}, a regression (one output): its attribution "
                      "needs the gold score (Appendix A), which a typed sentence does not have; choose a "
                      "classification model")
    num_labels = len(labels) if labels else config.get("num_labels", 2)  # a folder from elsewhere: its own count
    if not isinstance(num_labels, int) or num_labels < 2:
        raise Problem(f"model folder {folder}: config.json says num_labels {num_labels!r}; the explorer shows "
                      "classifiers, with two classes or more")
    if task and config.get("num_labels", num_labels) != num_labels:
        raise Problem(f"model folder {folder}: config.json says num_labels {config['num_labels']}, but {task} has "
                      f"{num_labels} classes; the folder mixes two models")
    return task, labels, num_labels

# -----------------------------------------------------------------------------
# one sentence

def encode(m, text_a, text_b=""):
    """The sentence (pair) as a batch of one: dict of (1, T) tensors; its tokens; a note if it was cut."""
    text_a, text_b = (text_a or "").strip(), (text_b or "").strip() or None
    if not text_a:
        raise Problem("Type a sentence (the first box is empty).")
    enc = m.tok.encode(text_a, text_b)
    notes = [f"The input was cut to {MAX_LEN} tokens (the model reads at most that many here); the rest is not "
             "shown."] if enc.overflowing else []
    if text_b and m.task and data.get_task(m.task).text_b is None:
        notes.append(f"This model was trained on single sentences ({data.get_task(m.task).name}): it reads the "
                     "pair, but never saw one in training.")
    encoded, _ = data.encode(m.tok, [data.Example(text_a, text_b, None)])
    batch = next(data.batches(encoded, None, 1, data.pad_token_id(m.tok)))
    del batch["index"]
    return batch, enc.tokens, " ".join(notes)


def scores(m, batch, key, method, layer):
    """B of one layer, (1, H, T, T): addrop.attribute, cached per (sentence, method, layer). GA and AA give every
    layer from one pass, so they fill the cache for all layers at once; IGA costs m passes per layer, so one."""
    if (*key, method, layer) not in m.cache:
        L = m.net.cfg.num_hidden_layers
        layers = [layer] if method == "iga" else list(range(L))
        for l, B in addrop.attribute(m.net, batch, layers, method, m=IG_STEPS).items():
            m.cache[(*key, method, l)] = B
        while len(m.cache) > 64:  # a few sentences' worth (GA fills L entries at once)
            m.cache.popitem(last=False)
    m.cache.move_to_end((*key, method, layer))
    return m.cache[(*key, method, layer)]


def needs_work(m, text_a, text_b, method, layer):
    """Whether `explore` will compute an attribution (not cached yet): the page says so first for IGA."""
    key = ((text_a or "").strip(), (text_b or "").strip())
    return method != "rd" and (*key, method, layer) not in m.cache

# -----------------------------------------------------------------------------
# what the page shows

def explore(m, text_a, text_b, method, low, layer, head, row, p, q, seed):
    """Everything the page shows for one setting, as a dict of plain numbers and lists (layer, head, row from 0).
    The mask acts on `layer` only (train.py's default for SST-2: the first layer); its coin flips come from a
    torch.Generator seeded with `seed`, so the same setting always draws the same mask."""
    if method not in addrop.ATTRIBUTIONS:
        raise Problem(f"unknown method {method!r}; choose one of {', '.join(addrop.ATTRIBUTIONS)}")
    batch, tokens, note = encode(m, text_a, text_b)
    net, L, H = m.net, m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads
    T = len(tokens)
    layer, head, row = min(max(int(layer), 0), L - 1), min(max(int(head), 0), H - 1), min(max(int(row), 0), T - 1)
    am = batch["attention_mask"]
    with torch.no_grad():
        logits, pseudo, attns = addrop._unmasked_pass(net, batch, None)  # Eq. 4: c~, and every A_l
    gen = torch.Generator().manual_seed(int(seed))
    if method == "rd":  # Table 2's RD: no scores, every real position dropped with probability p * q
        B, cand = None, None
        M = addrop.random_mask(am, H, p, q, generator=gen)  # (1, H, T, T)
    else:
        B = scores(m, batch, ((text_a or "").strip(), (text_b or "").strip()), method, layer)  # (1, H, T, T)
        M = addrop.drop_mask(B, am, p, q, low=low, generator=gen)  # Eq. 6-7, (1, H, T, T)
        cand = addrop.drop_mask(B, am, p, 1.0, low=low)  # q = 1: the candidate region of Eq. 6
        # at q = 1 a row whose every real key is a candidate loses them all, and drop_mask's guard then keeps the
        # whole row: an empty row there with candidates due means every key was one
        idx = T * round((1 - p) * 10**6) // 10**6  # int(n (1 - p)), computed as drop_mask computes it
        guarded = ~cand.any(-1, keepdim=True) & (T - idx > 0)  # (1, H, T, 1)
        cand = cand | guarded
    masks = [None] * L
    masks[layer] = M
    with torch.no_grad():
        after, _ = net(batch["input_ids"], am, batch["token_type_ids"], masks=masks)  # Eq. 1 with M_l
    c = int(pseudo[0])
    out = dict(tokens=tokens, n=T, note=note, classes=m.classes, pseudo=c, layer=layer, head=head, row=row,
               p=p, q=q, method=method, low=bool(low), seed=int(seed),
               probs=logits.softmax(-1)[0].tolist(), logits=logits[0].tolist(),
               probs_after=after.softmax(-1)[0].tolist(), logits_after=after[0].tolist(),
               pred_after=int(after[0].argmax()),
               loss=float(train.loss_sum(logits, pseudo, False)),  # a batch of one: the sum is the mean
               loss_after=float(train.loss_sum(after, pseudo, False)),
               A=attns[layer][0, head].tolist(), mask=M[0, head].tolist(),
               dropped_row=int(M[0, head, row].sum()), dropped_head=int(M[0, head].sum()),
               dropped_layer=int(M.sum()), dropped_per_head=M[0].sum((-1, -2)).tolist())
    if B is None:
        out.update(B=None, expected_head=p * q * T * T, expected_layer=p * q * T * T * H)
        return out
    b = B[0, head, row]  # (T,) the chosen query's scores
    order = (-b if low else b).argsort(stable=True)  # ascending in the score drop_mask sorts by (-B for low)
    out.update(B=B[0, head].tolist(), cand=cand[0, head].tolist(), order=order.tolist(), idx=idx,
               threshold_key=int(order[idx]) if idx < T else None,
               cand_row=int(cand[0, head, row].sum()), cand_head=int(cand[0, head].sum()), cand_layer=int(cand.sum()),
               expected_row=q * int(cand[0, head, row].sum()), expected_head=q * int(cand[0, head].sum()),
               expected_layer=q * int(cand.sum()), guarded_rows=int(guarded[0, head].sum()))
    return out

"""
The explorer's numbers, without the page: a model loaded once, a sentence's attribution computed once per
(sentence, method, layer), and for each p, q and seed a redrawn mask and a masked forward.

Every number comes from the project's own functions: the model's forward (model.Model), addrop.attribute for
B, addrop.MASKS for the masks ("high", "low", "random"), train.loss_sum for the loss. Attribution depends on
neither p nor q, so a move of p, q or the seed costs one drop_mask and one forward (milliseconds); a new
sentence or method costs one attribution. app.py draws what `explore` returns and adds nothing to it.

Bad input (an empty sentence, an unknown or broken model folder, a model for another task, a number typed
outside its range) raises Problem, whose message the page shows in place of the maps. `spread` gives the
seeds' spread of one setting: one draw of the coins is noise.
"""

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

import addrop
from support import checkpoint
import data
from model import bernoulli  # Eq. 7's coins, as the mask functions draw them (guard_rows)
import train

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL_MODEL = "runs/tutorial/model"  # where tutorial.ipynb keeps its trained model (relative to ROOT)
tutorial_dir = ROOT / TUTORIAL_MODEL     # where load("") looks for it (python -m explorer --tutorial-model sets it)
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
    spreads: OrderedDict = field(default_factory=OrderedDict)  # spread's answers, by its arguments


def load(folder=None):
    """A Loaded model: `folder` (a train.py output folder, or any weights folder), or with None or "" the
    tutorial's trained model, or where that is missing the installed all-MiniLM-L6-v2 with a fresh, seeded head.
    Raises Problem, in words, for a folder that is missing, broken, or trained for a task the explorer cannot show."""
    folder = (folder or "").strip()
    if not folder and tutorial_ready():
        folder = str(tutorial_dir)
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
    note = trained_on(d)
    if task is None:
        note = (f"`{folder}` names no task (not a train.py output folder): its classes go unnamed, and if it "
                "holds no classifier, the head is fresh and its predictions meaningless.")
    elif data.get_task(task).text_b is not None:
        note += f" This model was trained on {data.get_task(task).name}, sentence pairs: type both sentences."
    return Loaded(net, tok, tuple(classes), shown(d) if d == tutorial_dir else folder, task, note)


def shown(d):
    """A folder as the page names it: relative to the repository when inside it."""
    try:
        return str(Path(d).relative_to(ROOT))
    except ValueError:
        return str(d)


def tutorial_ready():
    """Whether the tutorial's model is in place (tutorial_dir holds its weights)."""
    return (tutorial_dir / "model.safetensors").is_file()


def trained_on(d):
    """A line on how the model in folder d was trained, from its metrics.json (train.py writes it), or ""."""
    try:
        saved = json.loads((d / "metrics.json").read_text())
        args, task = saved["args"], data.get_task(saved["args"]["task"])
        score = f"{task.metrics[0]} {saved['best_metric']:.3f} on " + (
            f"{args['dev_limit']} dev sentences" if args.get("dev_limit") else "the dev set")
        return (f"Trained model: fine-tuned on {args['limit'] or 'all the'} {task.name} training sentences, "
                f"{saved['epochs']} epoch(s); {score}.")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, data.DataError):
        return ""


def _fallback():
    """No folder and no tutorial model: the installed all-MiniLM-L6-v2 with a fresh head, the same at every start."""
    try:
        weights = checkpoint.default_weights_dir()
    except checkpoint.WeightsError as e:
        raise Problem(f"{shown(tutorial_dir)}/ is missing and {e}") from None
    with torch.random.fork_rng():  # the fresh head's init, the same at every start, the caller's stream untouched
        torch.manual_seed(FALLBACK_SEED)
        net = checkpoint.from_pretrained(weights, 2).eval()
    note = (f"**No trained model:** `{shown(tutorial_dir)}/` is missing (`python -m explorer` builds it on its "
            "first start, or run the tutorial's first cells), "
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

_lock = threading.Lock()  # the caches' bookkeeping: the page's update and its seeds' spread run in two threads

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
    with _lock:
        B = m.cache.get((*key, method, layer))
        if B is not None:
            m.cache.move_to_end((*key, method, layer))
            return B
    L = m.net.cfg.num_hidden_layers
    layers = [layer] if method == "iga" else list(range(L))
    new = addrop.attribute(m.net, batch, layers, method, m=IG_STEPS)
    with _lock:
        for l, B in new.items():
            m.cache[(*key, method, l)] = B
        while len(m.cache) > 64:  # a few sentences' worth (GA fills L entries at once)
            m.cache.popitem(last=False)
    return new[layer]


def needs_work(m, text_a, text_b, method, layer):
    """Whether `explore` will compute an attribution (not cached yet): the page says so first for IGA."""
    key = ((text_a or "").strip(), (text_b or "").strip())
    return method != "rd" and (*key, method, layer) not in m.cache

# -----------------------------------------------------------------------------
# what the page shows

SEED_MAX = 2**32 - 1  # torch.Generator takes seeds up to 2^64 - 1; a page's number box keeps whole numbers to 2^53
SEEDS = range(20)     # the draws the spread panel shows: one seed is one draw of the coins


def check(m, p, q, layer, head, seed):
    """The page's numeric controls as typed (layer and head from 1, as the page counts), checked: (p, q, layer,
    head, seed) with layer and head from 0. Raises Problem naming the first field out of its range, and the range.
    gradio's own range check would raise inside gradio instead: a traceback in the terminal and a bare "Error"
    in the page (app.py turns it off and lets this one speak)."""
    L, H = m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads

    def number(name, x, lo, hi, whole):
        what = f"a whole number from {lo} to {hi}" if whole else f"a number from {lo} to {hi}"
        try:
            x = float(x)
        except (TypeError, ValueError):
            raise Problem(f"{name} must be {what}; {x!r} is not a number.") from None
        if not (lo <= x <= hi) or (whole and x != int(x)):  # NaN fails the first test
            raise Problem(f"{name} must be {what}; it is {x:g}.")
        return int(x) if whole else x
    return (number("p (candidate fraction)", p, 0, 1, False), number("q (drop probability)", q, 0, 1, False),
            number("layer", layer, 1, L, True) - 1, number("head", head, 1, H, True) - 1,
            number("seed", seed, 0, SEED_MAX, True))


def mask_name(method, low):
    """addrop.MASKS' name of the mask a setting draws: RD its random one, the others "low" or "high"."""
    return "random" if method == "rd" else ("low" if low else "high")


def draw(m, B, am, method, low, p, q, seed):
    """The mask of one setting, (1, H, T, T): addrop.MASKS[...] with a torch.Generator seeded with `seed`. RD's
    scores are read for their shape only (zeros here)."""
    H, T = m.net.cfg.num_attention_heads, am.size(-1)
    if B is None:
        B = torch.zeros(1, H, T, T)
    return addrop.MASKS[mask_name(method, low)](B, am, p, q, generator=torch.Generator().manual_seed(int(seed)))


def guard_rows(region, am, prob, seed, M):
    """Which rows drop_mask's (or random_mask's) guard kept whole in this draw, (1, H, T) bool, or None when that
    cannot be told. The guard keeps a row whose every real key came up "drop"; the mask alone cannot tell such a row
    from one whose coins all came up "keep". So the coins are drawn again as the mask functions draw them (one
    model.bernoulli of the whole (1, H, T, T) at rate `prob` from the seeded generator), and the result is
    checked: the candidates `region` and these coins, less the guarded rows, must give M exactly, else None."""
    if prob <= 0:
        return torch.zeros(M.shape[:-1], dtype=torch.bool)
    real = am.bool()
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (1, 1, T, T)
    coins = bernoulli(tuple(M.shape), prob, torch.Generator().manual_seed(int(seed)))
    before = region & coins & pairs  # the drops before the guard
    fired = (before | ~real[:, None, None, :]).all(-1) & real[:, None, :]  # (1, H, T) every real key dropped
    return fired if torch.equal(before & ~fired[..., None], M) else None


def explore(m, text_a, text_b, method, low, layer, head, row, p, q, seed):
    """Everything the page shows for one setting, as a dict of plain numbers and lists (layer, head, row from 0).
    The mask acts on `layer` only (train.py's default for SST-2: the first layer); its coin flips come from a
    torch.Generator seeded with `seed`, so the same setting always draws the same mask."""
    if method not in addrop.ATTRIBUTIONS:
        raise Problem(f"unknown method {method!r}; choose one of {', '.join(addrop.ATTRIBUTIONS)}")
    batch, tokens, note = encode(m, text_a, text_b)
    net, L, H = m.net, m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads
    p, q, layer, head, seed = check(m, p, q, int(layer) + 1, int(head) + 1, seed)
    T = len(tokens)
    row = min(max(int(row), 0), T - 1)
    am = batch["attention_mask"]
    with torch.no_grad():
        logits, pseudo, attns = addrop._unmasked_pass(net, batch, None)  # Eq. 4: c~, and every A_l
    if method == "rd":  # Table 2's RD: no scores, every real position dropped with probability p * q
        B = None
        M = draw(m, None, am, method, low, p, q, seed)  # (1, H, T, T)
        region, prob = torch.ones_like(M), p * q  # every real pair, each dropped with probability p q
    else:
        B = scores(m, batch, ((text_a or "").strip(), (text_b or "").strip()), method, layer)  # (1, H, T, T)
        M = draw(m, B, am, method, low, p, q, seed)  # Eq. 6-7, (1, H, T, T)
        cand = addrop.MASKS[mask_name(method, low)](B, am, p, 1.0)  # q = 1: the candidate region of Eq. 6
        # at q = 1 a row whose every real key is a candidate loses them all, and the guard then keeps the whole
        # row: an empty row there with candidates due means every key was one
        idx = T * round((1 - p) * 10**6) // 10**6  # int(n (1 - p)), computed as drop_mask computes it
        everything = ~cand.any(-1, keepdim=True) & (T - idx > 0)  # (1, H, T, 1)
        cand = cand | everything
        region, prob = cand, q
    fired = guard_rows(region, am, prob, seed, M)
    masks = [None] * L
    masks[layer] = M
    with torch.no_grad():
        after, _ = net(batch["input_ids"], am, batch["token_type_ids"], masks=masks)  # Eq. 1 with M_l
    c = int(pseudo[0])
    out = dict(tokens=tokens, n=T, note=note, classes=m.classes, pseudo=c, layer=layer, head=head, row=row,
               p=p, q=q, method=method, low=bool(low), seed=seed, heads=H,
               probs=logits.softmax(-1)[0].tolist(), logits=logits[0].tolist(),
               probs_after=after.softmax(-1)[0].tolist(), logits_after=after[0].tolist(),
               pred_after=int(after[0].argmax()),
               loss=float(train.loss_sum(logits, pseudo, False)),  # a batch of one: the sum is the mean
               loss_after=float(train.loss_sum(after, pseudo, False)),
               A=attns[layer][0, head].tolist(), mask=M[0, head].tolist(),
               dropped_row=int(M[0, head, row].sum()), dropped_head=int(M[0, head].sum()),
               dropped_layer=int(M.sum()), dropped_per_head=M[0].sum((-1, -2)).tolist(),
               guard_known=fired is not None,
               guard_fired=None if fired is None else int(fired[0, head].sum()))  # rows of this head kept whole
    if B is None:
        out.update(B=None, expected_head=p * q * T * T, expected_layer=p * q * T * T * H)
        return out
    b = B[0, head, row]  # (T,) the chosen query's scores
    order = (-b if low else b).argsort(stable=True)  # ascending in the score drop_mask sorts by (-B for low)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(T)
    ties = cand[0, head, row] & (rank < idx)  # candidates sorted before the threshold entry: equal to it (Eq. 6's "at or above")
    out.update(B=B[0, head].tolist(), cand=cand[0, head].tolist(), order=order.tolist(), idx=idx,
               threshold_key=int(order[idx]) if idx < T else None, ties=ties.tolist(),
               cand_row=int(cand[0, head, row].sum()), cand_head=int(cand[0, head].sum()), cand_layer=int(cand.sum()),
               expected_row=q * int(cand[0, head, row].sum()), expected_head=q * int(cand[0, head].sum()),
               expected_layer=q * int(cand.sum()), all_candidates=int(everything[0, head].sum()))
    return out


def spread(m, text_a, text_b, method, layer, p, q, seeds=SEEDS):
    """One draw of the coins is noise: the pseudo-label logit's change, F_c~ masked - F_c~ unmasked, for each seed
    in `seeds`, under three masks at the same p, q and layer: the attribution's high and low (GA's when `method`
    is RD) and RD. Returns (attribution, {mask name: [change per seed]}). Each seed's mask is the one the page
    draws for that seed (`draw`); the masked forwards run as one batch of len(seeds) copies of the sentence, so
    a value may differ from the page's single forward in its last bits (float sums in another order)."""
    attribution = "ga" if method == "rd" else method
    key = ((text_a or "").strip(), (text_b or "").strip(), attribution, layer, p, q, tuple(seeds))
    with _lock:
        if key in m.spreads:  # a move of the seed, head, row or high/low changes none of it
            m.spreads.move_to_end(key)
            return m.spreads[key]
    batch, _, _ = encode(m, text_a, text_b)
    net, L = m.net, m.net.cfg.num_hidden_layers
    am = batch["attention_mask"]
    B = scores(m, batch, ((text_a or "").strip(), (text_b or "").strip()), attribution, layer)
    S = len(seeds)
    many = {k: v.repeat(S, 1) for k, v in batch.items()}
    with torch.no_grad():
        logits, pseudo, _ = addrop._unmasked_pass(net, batch, None)
        c = int(pseudo[0])
        out = {}
        for low, rd in ((False, False), (True, False), (False, True)):
            Ms = [draw(m, None if rd else B, am, "rd" if rd else attribution, low, p, q, s) for s in seeds]
            masks = [None] * L
            masks[layer] = torch.cat(Ms)  # (S, H, T, T)
            after, _ = net(many["input_ids"], many["attention_mask"], many["token_type_ids"], masks=masks)
            out[mask_name("rd" if rd else attribution, low)] = (after[:, c] - logits[0, c]).tolist()
    with _lock:
        m.spreads[key] = attribution, out
        while len(m.spreads) > 16:
            m.spreads.popitem(last=False)
    return attribution, out

"""
AD-DROP: Attribution-Driven Dropout (Yang et al., NeurIPS 2022), in one file.

Fine-tuning overfits; ordinary dropout drops units at random. AD-DROP drops the
self-attention positions that matter MOST for the current prediction, so that the
model learns to use the rest. One AD-DROP step (Section 2.3, Figure 3):

  1. forward the batch unmasked; pseudo label c~ = argmax of the logits        Eq. 4
  2. attribution of every attention position: B_l = dF_c~ / dA_l             Eq. 5 (= Eq. 2)
     (or integrated gradients, Eq. 3; or the ablations of Table 2)
  3. per row of B: candidates = the scores at or above b^[int(n (1 - p))], the
     row sorted; each dropped with probability q; M is 0 or -inf (drop)       Eq. 6-7
  4. forward again with the masks M_l added inside the softmax (Eq. 1): the loss
     of that pass, on the gold labels, is the one backpropagated (train.py's
     train_step: the plain step's own forward and loss, with the masks)

Cross-tuning (Algorithm 1) alternates: odd epochs plain fine-tuning, even epochs AD-DROP.

Steps 1-3 need nothing from the model but its attention probabilities A_l (out) and
per-layer additive masks M_l (in); see model.py.

Token-level tasks (NER, Appendix A) have a logit per token, hence no single F_c~ to
differentiate: there the attribution is B_l = -dL/dA_l, L the pseudo loss, the cross-entropy of
every scored token with its own pseudo label (Appendix A, Eq. 1-2). Only `objective` and
`pseudo_labels` tell the two kinds apart, by the shape of the logits.

The file reads top-down: first addrop_masks, steps 1-3 for one batch, which train.py calls at
each AD-DROP step; then the attribution (steps 1-2), the mask (step 3), cross-tuning (Algorithm 1),
and the variants: integrated gradients, the random baseline, the pseudo loss of token tasks. It
ends with the choices, ATTRIBUTIONS and MASKS: a new attribution or a new mask is one function
and one entry there.
"""

import functools
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from model import bernoulli, sync_free  # Eq. 7's coin flips, drawn as the model's ordinary dropout draws its own

FIRST_PASSES = ("eval", "train")  # the first pass in eval mode (ours), or in train mode (the authors' code)
IGNORE = -100  # a token label that no loss, metric or attribution reads (cross_entropy's ignore_index)

# -----------------------------------------------------------------------------
# steps 1-3 for one batch: the entry point

def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    """Algorithm 1, lines 7-8, for one batch: steps 1-3. Returns a list of L masks M_l (B, H, T, T) bool, True
    where M_l = -inf, for the second forward, None where a layer is not in `layers` (indices, 0 the lowest).
    Step 4, the masked forward and its loss, is the plain training step's own line with these masks
    (train.py's train_step).
    p: the candidate fraction, q: the drop probability of a candidate (Eq. 6-7); method: the attribution, a
    key of ATTRIBUTIONS; mask: a key of MASKS ("high" the paper's, "low" the mirror strategy of Section 2.2,
    "random" Table 2's RD); gold: attribute the gold labels instead of the pseudo labels (Table 2's
    ablation); regression: a one-output head (STS-B); m: integrated gradients' steps; first_pass: see
    attribute."""
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)  # steps 1-2
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M  # step 3
    return masks


def layer_masks(scores, attention_mask, p, q, mask="high"):
    """Step 3 for each layer's scores in the list `scores` (each (B, H, T, T)): MASKS[mask] of each, a list in
    that order. Eagerly, one call per layer. Under train.py --compile (GRAPH_BACKEND set), all layers in ONE
    compiled graph, as one batch of L B examples (each row with its example's real length): on a GPU a
    dozen layers' masks cost a few fused kernels instead of a dozen calls. Rows are independent, so each
    layer's mask is the one it gets alone, for the same coin flips (on a CPU the flips come in the same
    order from one stream; a GPU's compiled stream is its own)."""
    if not GRAPH_BACKEND:
        return [MASKS[mask](B, attention_mask, p, q) for B in scores]
    return whole_graph(_stacked(mask), GRAPH_BACKEND)(scores, attention_mask, p, q)


@functools.cache
def _stacked(mask):
    """MASKS[mask] of L layers' scores as one batch of L B examples: the function layer_masks compiles."""
    def stacked(scores, attention_mask, p, q):
        return MASKS[mask](torch.cat(scores), attention_mask.repeat(len(scores), 1), p, q).chunk(len(scores))
    return stacked


GRAPH_BACKEND = None  # train.py --compile sets a torch.compile backend here: the masks then run as compiled graphs


@functools.cache
def whole_graph(fn, backend):
    """fn through torch.compile as ONE graph (fullgraph=True fails on anything it cannot capture): the masks
    and their count, which under compile read no number back to the CPU (model.sync_free). On a GPU their
    dozens of small kernels become a few fused ones. backend None: fn itself, run eagerly."""
    return torch.compile(fn, backend=backend, fullgraph=True, dynamic=False) if backend else fn

# -----------------------------------------------------------------------------
# steps 1-2: attribution

def attribute(model, batch, layers, method="ga", labels=None, regression=False, m=20, ig_budget=None,
              first_pass="eval"):
    """Attribution scores B_l (B, H, T, T) for each layer index l in `layers`, as a dict {l: B_l}, by
    ATTRIBUTIONS[method]: "ga" the gradient B_l = dF/dA_l (Eq. 5), F the scalar of `objective`, A_l layer
    l's attention probabilities as the model hands them out; "iga" integrated gradients with m steps (Eq. 3);
    "aa" the attention weights themselves and "rd" no attribution at all (Table 2). batch: a dict of (B, T)
    tensors, input_ids, attention_mask, token_type_ids and labels.

    labels: None for pseudo labels (the paper), or the gold labels (Table 2's ablation).
            Regression always uses the gold score, through the loss.
    m, ig_budget: integrated gradients' number of steps, and the most attention entries one
            chunk of its steps may hold (None: a default for the device; see integrated_gradients).
    first_pass: "eval" (ours): the first pass runs in eval mode, so that the pseudo label is
            the model's actual prediction (Eq. 4) and the attribution is not randomised by
            ordinary dropout; the paper does not say. "train" (the authors' code): dropout on,
            and A taken after attention dropout, so B is the gradient with respect to the
            dropped, rescaled map and AA's scores are that map. Not for IGA: a map with dropout's
            zeros on it is no point of the path from 0 to A_l.
    The model comes back in the mode it came in. No parameter gradient is computed or left behind:
    autograd.grad differentiates with respect to the attention maps only, and .grad fields are never touched.
    """
    if method not in ATTRIBUTIONS:
        raise ValueError(f"unknown attribution {method!r}; choose one of {', '.join(ATTRIBUTIONS)}")
    if first_pass == "train" and method == "iga":
        raise ValueError("the authors' first pass (train mode) is offered for ga and aa only")
    if regression:
        labels = batch["labels"]
    was_training = model.training
    model.train(first_pass == "train")  # each attribution reads the mode: dropout and dropped_A in train mode
    try:
        with torch.enable_grad():  # the gradients are taken even where the caller runs under no_grad
            return ATTRIBUTIONS[method](model, batch, layers, labels, regression, m, ig_budget)
    finally:
        model.train(was_training)  # the authors' code leaves eval mode on after IG: not here


def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    """GA, Eq. 5: B_l = dF/dA_l for each l in `layers`, all from ONE backward (the authors run one per
    layer), F `objective` of `labels` (None: the pseudo labels of this pass, Eq. 4). In train mode (the
    authors' first pass) each A_l is taken after attention dropout. m, ig_budget: unused (IGA's).
    dF/dA_l is taken as dF/dZ_l, Z_l zeros added to A_l (Layer.forward's probe): the same numbers, and an
    input of the model, which a compiled model can be differentiated with respect to."""
    B, T = batch["input_ids"].size()
    zero = torch.zeros((), dtype=next(model.parameters()).dtype, device=batch["input_ids"].device)
    probes = [zero.expand(B, model.cfg.num_attention_heads, T, T).requires_grad_() if l in layers else None
              for l in range(model.cfg.num_hidden_layers)]  # one stored zero each, (B, H, T, T) in shape
    with _frozen(model):
        logits, labels, _ = _unmasked_pass(model, batch, labels, dropped_A=model.training, probes=probes)
        grads = torch.autograd.grad(objective(logits, labels, regression), [probes[l] for l in layers])
    return dict(zip(layers, grads))


def attention_weights(model, batch, layers, labels=None, regression=False, m=None, ig_budget=None):
    """AA, Table 2: the attention probabilities A_l themselves; no label, no layer above the highest
    selected one, and in that one nothing past its map (first_only)."""
    with torch.no_grad():
        _, attns = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                                 depth=max(layers) + 1, first_only=True, dropped_A=model.training)
    return {l: attns[l] for l in layers}


def no_attribution(model, batch, layers, labels=None, regression=False, m=None, ig_budget=None):
    """RD, Table 2: no first pass and no attribution. Every score is the same zero (the (B, H, T, T) shape
    of a map, no memory): the random mask reads only the shape."""
    B, T = batch["input_ids"].size()
    zero = torch.zeros((), device=batch["input_ids"].device)
    return {l: zero.expand(B, model.cfg.num_attention_heads, T, T) for l in layers}


@contextmanager
def _frozen(model):
    """The attribution pass's parameters set to need no gradient, and set back after: then a compiled
    model's backward computes gradients for the attention maps only, as eager autograd.grad does."""
    params = [w for w in model.parameters() if w.requires_grad]
    for w in params:
        w.requires_grad_(False)
    try:
        yield
    finally:
        for w in params:
            w.requires_grad_(True)


def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    """Step 1: the first, unmasked forward of `batch` (see attribute). Returns the logits, the
    labels to attribute and the attention maps [A_l (B, H, T, T)] * L. The labels are `labels`
    as given or, when None, the pseudo labels c~ (Eq. 4, pseudo_labels). dropped_A and probes go
    to the model: True hands out each A_l after attention dropout (the authors' first pass)."""
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = pseudo_labels(logits, batch)  # Eq. 4
    return logits, labels, attns


def pseudo_labels(logits, batch):
    """Eq. 4: the predicted class, c~ = argmax of the logits, of each example, or for a token
    task of each token the task scores (IGNORE kept where the batch's labels have it)."""
    c = logits.argmax(-1)
    if logits.dim() == 3:
        c = c.masked_fill(batch["labels"] == IGNORE, IGNORE)
    return c


def objective(logits, labels, regression):
    """F, the scalar whose gradient dF/dA_l is the attribution B_l (Eq. 5).
    Classification, logits (B, K) and labels (B,): F = sum_i F_c~i(x_i), the sum over the batch
    of the logit of each example's label c~i (its pseudo label, Eq. 4, or the label given).
    Regression, logits (B, 1) and labels (B,) the gold scores y_i: there is no label to pick, so
    F = -L, minus the squared-error loss L = 1/2 sum_i (y^_i - y_i)^2 of the predictions y^_i
    (Appendix A): positions whose attention lowers the loss score high.
    Token tasks, logits (B, T, K) and labels (B, T): F = -L, L the pseudo loss (pseudo_loss).
    Summing over the batch is harmless: examples do not interact, so dF/dA of example i is
    example i's own gradient."""
    if logits.dim() == 3:
        return -pseudo_loss(logits, labels)
    if regression:
        return -0.5 * ((logits.squeeze(-1) - labels) ** 2).sum()
    return logits.gather(1, labels[:, None]).sum()

# -----------------------------------------------------------------------------
# step 3: the mask (Eq. 6-7)

def drop_mask(scores, attention_mask, p, q, low=False, generator=None):
    """The sort-threshold-Bernoulli mask of Eq. 6-7, for one layer.

    scores (B, H, T, T) attribution; attention_mask (B, T) 1 real, 0 padding; p the candidate
    fraction, q the drop probability of a candidate; generator: the random stream of the coin
    flips (None: torch's default).
    Returns M (B, H, T, T) as booleans, True where M_l = -inf (the position is dropped)
    and False where M_l = 0: the same mask at a quarter of the memory (see model.Layer).

    Per row (example, head, query): the candidates are every position scoring at or above
    the row's threshold b^[int(n (1 - p))] (Eq. 6, threshold: n is the row's real length,
    padding keys are never candidates); each candidate is dropped with probability q (kept
    where u ~ Bernoulli(1 - q) is 1, Eq. 7). Rows of padding queries are left alone (see
    _real_rows). low=True is the mirror strategy of Section 2.2: candidates are the LOWEST
    scores, those at or above the threshold of the negated scores.

    Deliberate edge cases:
    - ties at the threshold are all candidates ("at or above"), as in the authors' code.
    - q = 0 drops nothing; q = 1 drops every candidate. q = 0 and p = 0 draw no coin flips.
    - a row whose every real key would be dropped would be NaN after softmax (-inf
      everywhere). Such a row keeps all its keys instead: AD-DROP cannot ask a query to
      attend to nothing. (The authors' -10000 on every key cancels: all keys, padding too.)
    """
    B, H, T, _ = scores.size()
    if q == 0 or _kept_millionths(p) == 10**6:  # nothing is dropped: no coin flips are drawn
        return torch.zeros(B, H, T, T, dtype=torch.bool, device=scores.device)
    if low:
        scores = -scores
    drop = scores >= threshold(scores, attention_mask.bool()[:, None, None, :], p)  # Eq. 6: s = 0, the candidates
    drop &= bernoulli((B, H, T, T), q, generator, scores.device)  # Eq. 7: dropped where s = 0 and u = 0
    return _real_rows(drop, attention_mask)


def threshold(scores, real, p):
    """Eq. 6's threshold of each row of scores (..., T): sort the row's n real scores ascending into b^ and
    read b^[int(n (1 - p))] (counted from 0). real: bool, broadcastable to scores, True at a row's real
    keys (padding keys are neither counted in n nor candidates). Returns (..., 1): +inf where the row has no
    candidate (the index is n, past the end: p = 0). Any mask that cuts a row at a share p of its real
    keys can use it: drop_mask does, for the scores or (low) their negatives.
    - int(n (1 - p)) is computed in integers (p to 6 decimals): in floating point 10 * (1 - 0.9) is
      0.99999..., and int() would give 0 instead of 1. p = 1: index 0, every real key a candidate."""
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = _kept_millionths(p)
    if keep == 10**6:  # p = 0: no candidates
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)) in exact integers, (..., 1)
    if sync_free(scores.device):
        # Eq. 6 as written: each row sorted ascending, padding last, and its entry idx read
        b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values
        thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))  # b^[idx]
        return thr.masked_fill(idx == n, float("inf"))  # idx = n: no candidates
    return _select_threshold(scores, real, n, idx)  # the same b^[idx], by selection: 2.5x faster on a CPU


def _kept_millionths(p):
    """1 - p to 6 decimals, times 10^6, an integer: the share of a row below Eq. 6's threshold."""
    return round((1 - p) * 10**6)


def _select_threshold(scores, real, n, idx):
    """threshold's b^[idx] (..., 1) on an eager CPU, where one selection (kthvalue) for all rows is
    2.5x faster than sorting each (it reads one number back, k: see model.sync_free). The order
    statistic must be the same k-th largest in every row, but each row wants its own count-th
    largest real score. So padding sorts below every real key, except the first k - count padding keys
    of each row, which sort above: then the k-th largest of a row is its count-th largest real
    score. (There are always enough padding keys, since count grows by at most one per real key.)"""
    T = scores.size(-1)
    count = n - idx  # positions at or above b^[idx] when there are no ties: b^[idx] is the count-th largest
    k = int(count.max())
    lift = ~real & ((~real).cumsum(-1) <= k - count)
    bias = torch.zeros(lift.shape, dtype=scores.dtype, device=scores.device)
    bias = bias.masked_fill(~real, float("-inf")).masked_fill(lift, float("inf"))
    return (scores + bias).kthvalue(T - k + 1, dim=-1, keepdim=True).values  # +inf where count = 0


def _real_rows(drop, attention_mask):
    """What drop_mask and random_mask both do last, in place on drop (B, H, T, T):
    - only real (query, key) pairs are dropped: padding keys are not candidates, and a
      padding query's row reaches no real position (every later layer gives it zero
      weight), so its mask would change nothing: it gets none;
    - the guard: a row that would lose every real key (all -inf: NaN after softmax) keeps
      them all instead."""
    real = attention_mask.bool()
    drop &= real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T) real pairs
    if sync_free(drop.device):
        lost = (drop | ~real[:, None, None, :]).all(-1, keepdim=True)  # (B, H, T, 1) all real keys dropped
        return drop & ~lost  # such rows keep everything
    # Why it is fast on a CPU: the guard's "all" and "and" run on the bytes of the bools, as uint8 min and
    # multiply: the same values, but torch vectorises those and not the bool forms, 3x faster. (Inductor
    # cannot compile a bool's view as uint8: hence the plain form above on a GPU and under compile.)
    lost = (drop | ~real[:, None, None, :]).view(torch.uint8).amin(-1, keepdim=True)  # (B, H, T, 1) 1: all real keys dropped
    drop.view(torch.uint8).mul_(1 - lost)  # such rows keep everything
    return drop

# -----------------------------------------------------------------------------
# Algorithm 1: which epochs run AD-DROP

def is_addrop_epoch(epoch, cross_tuning=True):
    """epoch counts from 1. With cross-tuning, epochs 1, 3, 5, ... fine-tune plainly and
    epochs 2, 4, 6, ... run AD-DROP; without it (Table 2's ablation) every epoch does."""
    return epoch % 2 == 0 if cross_tuning else True

# -----------------------------------------------------------------------------
# variants: integrated gradients (Eq. 3), the random baseline (Table 2), token tasks (Appendix A)

def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    """Eq. 3: B_l = A_l / m * sum_{k=1..m} dF(k/m A_l)/dA_l for each l in `layers`, a right
    Riemann sum of m steps along the path from 0 to A_l: layer l's attention is scaled by k/m
    (Layer.forward's `scale`), the other layers run as they are. F is `objective` of the
    `labels` (None: the pseudo labels of the unscaled forward, Eq. 4) and of `regression`.
    Returns {l: B_l}.

    Why it is fast: two savings that change no number. The layers below l do not depend on
    the scale, so their output x_l is computed once and reused for all m steps and all layers;
    and the m steps run as one batch of m*B examples (in chunks of at most ig_budget
    attention entries, to bound memory). By default chunks are large on a GPU, which needs
    the work to fill it, and small on a CPU, whose cores a single copy already keeps busy:
    there bigger chunks only outgrow the caches (2 steps per chunk ran 1.6x faster than 10,
    MiniLM at 16 x 128)."""
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(1, m + 1, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += g.view(k, B, H, T, T).sum(0)
        scores[l] = attns[l] * total / m
    return scores


def random_mask(scores, attention_mask, p, q, generator=None):
    """RD, Table 2's random baseline: the candidate region is a random p-fraction of each row
    and each candidate is dropped with probability q, so every real key is dropped
    independently with probability p * q (as the authors' code does). Needs no first pass
    and no selection: scores (B, H, T, T) are read for their shape only. attention_mask (B, T)
    1 real, 0 padding; generator as in drop_mask. Same shape, values and guard as drop_mask."""
    B, H, T, _ = scores.size()
    return _real_rows(bernoulli((B, H, T, T), p * q, generator, attention_mask.device), attention_mask)


def pseudo_loss(logits, labels):
    """Appendix A, Eq. 2: L = -sum_i log P(c~_i | x, i), the cross-entropy of every token i with
    its pseudo label c~_i, summed over the batch; logits (B, T, K), labels (B, T). Tokens labelled
    IGNORE (word continuations, special tokens, padding) add nothing: each word counts once, on its
    first sub-token (Eq. 2 sums over every token, the authors' code over every real one: README,
    "Where this differs from the authors' code"). Its gradient is
        -dL/dA = sum_i sum_c (y_ic - P_ic) dF_ic/dA                                  (Eq. 3)
    with F_i token i's logits, P_i = softmax(F_i) its probabilities and y_i its one-hot pseudo
    label: every class c moves P_c~ through the softmax. The paper's
    Eq. 3 writes only the c = c~ term; autograd gives the whole sum (lesson 15 shows both)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum")

# -----------------------------------------------------------------------------
# a measure for the log

def dropped_fraction(masks, attention_mask):
    """The fraction of (real query, real key) positions dropped over the masked layers,
    as a 0-dim tensor (no device sync: the caller decides when to read it). It counts the rows
    that cannot change the loss too: in a sentence task's last layer only the first token's
    row reaches the head, the others' scores are all 0, every key ties at the threshold and is
    dropped with probability q, not about p q."""
    Ms = [M for M in masks if M is not None]
    if not Ms:
        return torch.zeros((), device=attention_mask.device)
    dropped = sum(M.count_nonzero() for M in Ms)  # masks drop real (query, key) pairs only
    n = attention_mask.sum(-1)
    return dropped / ((n * n).sum() * Ms[0].size(1) * len(Ms))

# -----------------------------------------------------------------------------
# the choices: a new attribution or mask is one function and one entry here (train.py's --attribution and
# --mask offer every key; the eager, GPU and compiled paths all call through these tables)

ATTRIBUTIONS = {  # name -> fn(model, batch, layers, labels, regression, m, ig_budget) -> {l: B_l (B, H, T, T)}
    "ga": gradient,  # Eq. 5
    "iga": integrated_gradients,  # Eq. 3
    "aa": attention_weights,  # Table 2's AA
    "rd": no_attribution,  # Table 2's RD, with the random mask
}


def low_mask(scores, attention_mask, p, q, generator=None):
    """The mirror strategy of Section 2.2: drop_mask's candidates are the LOWEST scores."""
    return drop_mask(scores, attention_mask, p, q, low=True, generator=generator)


MASKS = {  # name -> fn(scores (B, H, T, T), attention_mask (B, T), p, q, generator=None) -> M (B, H, T, T) bool
    "high": drop_mask,  # Eq. 6-7: the paper's
    "low": low_mask,  # Section 2.2's mirror
    "random": random_mask,  # Table 2's RD
}

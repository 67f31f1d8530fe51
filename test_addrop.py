"""
Tests for addrop.py, written as a sequence of lessons: read them top to bottom to learn AD-DROP.

    1-5    attribution: what B_l = dF/dA_l is, and how it is computed (Eq. 2, 3, 5)
    6-9    the mask: sort, threshold, Bernoulli (Eq. 6-7), and what it does to attention (Eq. 1)
    10-14  the rest: cross-tuning, pseudo vs gold labels, regression, the ablations, --layers
    15-17  token-level tasks (NER, Appendix A): one attribution from many outputs, the pseudo loss
    18     the authors' first pass, and what attribute itself checks
    19-21  the masks of an AD-DROP step: Algorithm 1, lines 7-8, as train.py asks for them

Everything runs in float64 on a tiny random model, micrograd-style, and is checked against
autograd, finite differences or a literal re-implementation of the paper's recipe. Each check
(checks.py) says in words what it measured and what it expected.

    python -m pytest -q test_addrop.py                  # all lessons (a few seconds on a CPU)
    python -m pytest -q test_addrop.py -k completeness  # one lesson

As exercises (README.md, section Exercises): each exercise file, exercises/NN_name.py, holds one
function to write and its contract. --impl runs the lessons of that exercise alone, the student's
function in place of the real one and the real code for everything else (exercises/plugin.py, impl.py):

    python -m pytest test_addrop.py --impl exercises/05_threshold.py

A lesson that reaches a body not written yet fails with that exercise's message alone: its
number, its equation, and the command that runs only its lessons; a wrong answer, with what
was measured and what was expected.
"""

import itertools
import math
import types

import pytest
import torch

import addrop
import model
from support import settings
import impl
from checks import Wrong, close, same, true

CFG = dict(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
           intermediate_size=24, max_position_embeddings=32)
L = CFG["num_hidden_layers"]
ALL = list(range(L))
LENGTHS = (7, 5, 3, 6)  # a padded batch of four sentences, T = 7
INF = float("inf")


def tiny_model(num_labels=3, seed=0):
    """A tiny random Model in float64 and eval mode. Parameters are pushed well away from BERT's
    small init, so that attention is peaked and F is visibly curved in A (else every lesson about
    integrated gradients would hold trivially for a nearly linear F)."""
    torch.manual_seed(seed)
    net = model.Model(model.Config(**CFG), num_labels).double()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return net.eval()


def padded_batch(lengths=LENGTHS, regression=False, seed=0):
    """Random token ids right-padded with 0, as train.py's batches: a dict of (B, T) tensors."""
    g = torch.Generator().manual_seed(seed)
    B, T = len(lengths), max(lengths)
    mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()  # (B, T) 1 real, 0 padding
    ids = torch.randint(1, CFG["vocab_size"], (B, T), generator=g) * mask
    labels = torch.randn(B, generator=g, dtype=torch.float64) if regression else torch.randint(0, 3, (B,), generator=g)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)


def run(net, batch, **kw):
    return net(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], **kw)


def forward_scaled(net, batch, l, scale):
    """The model's forward written out, with layer l's attention multiplied by `scale`
    (Layer.forward's hook for integrated gradients). Returns the logits and layer l's A * scale."""
    enc = net.encoder
    x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    for i, layer in enumerate(enc.layers):
        x, A = layer(x, pad, scale=scale if i == l else None)
        if i == l:
            A_l = A
    return net.head(x), A_l


def pseudo_labels(net, batch):
    with torch.no_grad():
        return run(net, batch)[0].argmax(-1)  # Eq. 4


def named_slip(yours, right, slips, what, expected):
    """Fails with words if the number `yours` is not `right` but one of `slips` {words: value}, to 1e-10: what
    was computed, named. Otherwise leaves the comparison to the lesson's own check."""
    near = lambda a, b: abs(float(a) - float(b)) <= 1e-10
    for words, value in slips.items():
        true(near(yours, right) or not near(yours, value), f"{what}: {float(yours):.4f}, {words}; expected "
             f"{float(right):.4f}, {expected}")


def label_names(labels, logits, batch, case, given=None):
    """Fails with words if `labels`, what _unmasked_pass returned with labels=`case`, are not the labels to
    attribute: `given` where labels were given, else Eq. 4's pseudo labels, the model's own predictions."""
    expected = logits.detach().argmax(-1) if given is None else given
    if torch.equal(labels, expected):
        return
    named = [(given, "the labels it was given"), (logits.detach().argmax(-1), "the model's predictions (Eq. 4)"),
             (logits.detach().argmin(-1), "the least likely classes (an argmin)"), (batch["labels"], "the gold labels "
             'batch["labels"]')]
    what = next((words for t, words in named if t is not None and torch.equal(labels, t)),
                f"{labels.tolist()}, where the model predicts {logits.detach().argmax(-1).tolist()}")
    true(False, f"_unmasked_pass(labels={case}) returned as the labels to attribute {what}; expected "
         + ("the labels given: a caller that passes labels (Table 2's gold labels) attributes those" if given is not None
            else "Eq. 4's pseudo labels, the model's own predictions argmax_c P_F(c | x): with no labels given, "
            "AD-DROP attributes what the model predicts, not the gold label (Section 2.3 says why)"))


def keys(positions, what="key"):
    """A set of key positions in words, by index: 'key indices 0-3, 7', 'key index 1', or 'none'."""
    runs = []
    for k in sorted(positions):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    said = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"{what} {'index' if len(positions) == 1 else 'indices'} {said}" if said else "none"

# -----------------------------------------------------------------------------
# 1-5. attribution

def first_pass_labels_named(batch):
    """Lesson 1's first checks of exercises 2 and 3, each failure named: the labels _unmasked_pass
    returns (given ones, or the predictions), and objective's value against its common slips."""
    mixed = tiny_model(seed=3)  # predicts 2, 2, 0, 1 here, where net predicts 2 for all four: one label won't do
    mixed_logits, mixed_labels, _ = addrop._unmasked_pass(mixed, batch, None)
    label_names(mixed_labels, mixed_logits, batch, "None")
    given = (pseudo_labels(mixed, batch) + 1) % 3  # a label on every example that is not the model's prediction
    label_names(addrop._unmasked_pass(mixed, batch, given)[1], mixed_logits, batch, "a label other than the prediction",
                given)
    z, c4 = torch.linspace(-2, 2, 12, dtype=torch.float64).view(4, 3).sin() * 3, torch.tensor([0, 2, 1, 2])
    pick = lambda t: t.gather(1, c4[:, None]).sum()
    named_slip(addrop.objective(z, c4, False), pick(z), {
        "the sum of the labels' log-probabilities (log-softmax), not of their logits": pick(z.log_softmax(-1)),
        "the sum of the labels' probabilities (softmax), not of their logits": pick(z.softmax(-1)),
        "minus the sum of the labels' logits": -pick(z)}, "objective of 4 examples' logits (3 classes)",
        "the sum of each example's logit of its label, F_c~ (Eq. 5: \"the logit output of pseudo label c~ before softmax\")")


def first_pass_honours_dropped_A(net, batch):
    """Lesson 1: in train mode, _unmasked_pass(dropped_A=True) returns the maps after attention dropout."""
    with torch.no_grad():  # in train mode (attention dropout on), dropped_A=True hands out each map after dropout
        maps = {}
        for key, call in [("yours", lambda: addrop._unmasked_pass(net, batch, None, dropped_A=True)[2]),
                          ("after", lambda: run(net, batch, dropped_A=True)[1]), ("before", lambda: run(net, batch)[1])]:
            net.train()
            torch.manual_seed(0)  # the same dropout draws in each
            maps[key] = call()
        net.eval()
    true(not (all(map(torch.equal, maps["yours"], maps["before"])) and not torch.equal(maps["after"][0], maps["before"][0])),
         "_unmasked_pass(..., dropped_A=True), in train mode, returned the maps before attention dropout: the model "
         "was not handed dropped_A; expected this forward to honour `dropped_A` (and `probes`) as the caller chose "
         "them (the contract): the authors' first pass attributes the map after dropout (train.py --first-pass train)")


@pytest.mark.exercise(2, 3, 4)
def test_gradient_is_a_finite_difference():
    """Lesson 1. B_l = dF_c~/dA_l (Eq. 5) is the change of the pseudo-label logit when ONE attention
    probability moves, everything else held fixed. To move one entry we reuse Layer.forward's
    `scale`, which multiplies A elementwise: scale = 1 + eps/A at (b, h, i, j) and 1 elsewhere turns
    A into A + eps there (A > 0 on real keys). Central differences, eps = 1e-6: error ~1e-8 relative."""
    net, batch = tiny_model(), padded_batch()
    logits, labels, attns = addrop._unmasked_pass(net, batch, None)
    B = len(LENGTHS)
    true(tuple(labels.shape) == (B,) and not labels.is_floating_point(), f"_unmasked_pass(labels=None) on a batch of "
         f"{B} returned pseudo labels of shape {tuple(labels.shape)} ({labels.dtype}); expected one class index per "
         f"example, ({B},), integers")
    first_pass_labels_named(batch)
    graphless = [l for l, A in enumerate(attns) if not A.requires_grad]
    false = [f"the maps of layers {graphless}"] * bool(graphless) + ["the logits"] * (not logits.requires_grad)
    true(not false, "the maps your forward returned carry no autograd graph (requires_grad False: "
         f"{', '.join(false)}), so no attribution can be taken from them; expected the first pass's maps and logits in the autograd graph "
         "of the model's parameters")
    probes = [torch.zeros_like(A, requires_grad=True) for A in attns]  # the model's `probes` keyword: added to A_l
    logits = addrop._unmasked_pass(net, batch, None, probes=probes)[0]
    unused = [l for l, g in enumerate(torch.autograd.grad(logits.sum(), probes, allow_unused=True)) if g is None]
    true(not unused, f"_unmasked_pass(..., probes=P) returned logits that do not depend on the probes of layers "
         f"{unused}: the model was not given them; expected this forward to honour `probes` (and `dropped_A`) as "
         "the caller chose them (the contract): exercise 4's attribution differentiates with respect to them")
    first_pass_honours_dropped_A(net, batch)
    B_all = addrop.attribute(net, batch, ALL, "ga")
    with torch.no_grad():  # a caller's no_grad (an evaluation loop, say) must not stop attribute's backward
        try:
            B_ng = addrop.attribute(net, batch, ALL, "ga")
        except RuntimeError as e:
            true(False, f"attribute called under torch.no_grad() (as an evaluation loop calls it) raised "
                 f"{str(e).splitlines()[0]!r}; expected the same B_l as without no_grad: a caller's no_grad does not "
                 "reach the attribution's own forward and backward")
    for l in ALL:
        same(B_ng[l], B_all[l], f"B_{l} from attribute called under torch.no_grad(), against without")
    c = pseudo_labels(net, batch)
    with torch.no_grad():
        attns = run(net, batch)[1]
        eps = 1e-6
        # (layer, example, head, query, key); in the last layer only query 0 ([CLS]) reaches the head
        for l, b, h, i, j in [(0, 0, 0, 0, 0), (0, 2, 1, 1, 2), (1, 1, 1, 2, 4), (1, 0, 1, 6, 3), (2, 3, 0, 0, 5)]:
            F = []
            for sign in (+1, -1):
                scale = torch.ones_like(attns[l])
                scale[b, h, i, j] = 1 + sign * eps / attns[l][b, h, i, j]
                F.append(forward_scaled(net, batch, l, scale)[0][b, c[b]])  # example b's own logit
            fd, g = ((F[0] - F[1]) / (2 * eps)).item(), B_all[l][b, h, i, j].item()
            at = f"layer {l}, example {b}, head {h}, query {i}, key {j}"
            n = len(LENGTHS)
            true(abs(g * n / fd - 1) > 1e-3, f"B_l at {at} is 1/{n} of the change of example {b}'s own pseudo-label "
                 f"logit when that one attention probability moves (a batch of {n}); expected the change itself: an "
                 "example's attribution does not depend on the batch around it (Eq. 5, its own F_c~)")
            close(g, fd, f"B_l = dF/dA_l at {at}, against the central finite difference of example {b}'s "
                  "pseudo-label logit when that one attention probability moves", rtol=1e-7)
            true(abs(g) > 1e-3, f"B_l at {at} is {g:.1e}: an entry that matters (above 1e-3) was expected, "
                 "so that the comparison means something")


@pytest.mark.exercise(2, 3, 4, 8)
@pytest.mark.parametrize("training", [True, False])
def test_one_backward_equals_one_per_layer(training):
    """Lesson 2. All layers' B_l come from ONE backward: autograd.grad of the scalar F with respect to
    the list [A_l] is, entry by entry, what separate grad calls per layer give (the authors' loop).
    Attribution differentiates with respect to A only, so no parameter .grad is filled (GA's and IGA's).
    It runs in eval mode (no dropout noise) whatever mode the model came in (lesson 18b checks that it
    comes back in it)."""
    net, batch = tiny_model(), padded_batch()
    logits, attns = run(net, batch)  # eval mode, as attribution runs
    F = logits.gather(1, logits.argmax(-1)[:, None]).sum()
    loop = [torch.autograd.grad(F, attns[l], retain_graph=True)[0] for l in ALL]
    net.train(training)
    mode = "train" if training else "eval"
    B_all = addrop.attribute(net, batch, ALL, "ga")
    for l in ALL:
        close(B_all[l], loop[l], f"B_l of layer {l} from attribute (the model in {mode} mode), against the real "
              "attribution's B_l of that layer (eval mode, the pseudo labels), taken by a backward of its own",
              atol=1e-12)
    flows = []  # one entry each time a gradient flows back through the logits: one per backward pass

    def count(module, args, logits):
        if logits.requires_grad:
            logits.register_hook(lambda grad: flows.append(1))
    handle = net.head.register_forward_hook(count)
    try:
        addrop.attribute(net, batch, ALL, "ga")
    finally:
        handle.remove()
    true(len(flows) == 1, f"in one call of attribute(method='ga') for {L} layers the gradient flowed back through the "
         f"logits {len(flows)} times; expected once: one backward pass gives every selected layer's B_l (the contract)")
    for method in ("ga", "iga"):
        addrop.attribute(net, batch, [0, 2], method, m=3)
        filled = sum(p.grad is not None for p in net.parameters())
        true(filled == 0, f"attribute(method={method!r}) left .grad set on {filled} parameters; expected none: "
             "B_l is a gradient with respect to the attention maps A_l only (Eq. 5), and every .grad is left as it was")


@pytest.mark.exercise(8)
def test_integrated_gradients_completeness():
    """Lesson 3. Integrated gradients (Eq. 3) is a right Riemann sum of the path integral
    F(A) - F(0) = int_0^1 A . dF(aA)/dA da, so for each example the sum of B_l over heads and
    positions tends to F(A) - F(0) (one layer scaled, the others as they are). The sum's error
    is about |g(1) - g(0)| / 2m: it shrinks roughly 4x each time m grows 4x. Four mistakes that break it
    are named first, at m = 4: each step's gradient times k/m (the chain rule's factor of A -> F(k/m A)),
    the mean gradient not multiplied by A_l, the sum not divided by m, and each step's own prediction
    attributed instead of the unscaled forward's pseudo label."""
    net, batch = tiny_model(), padded_batch()
    l, c = 1, pseudo_labels(net, batch)
    yours = addrop.attribute(net, batch, [l], "iga", m=4)[l]
    for other, said in [(plain_integrated_gradients(net, batch, l, 4, weight=lambda a: a),
                         "each step's gradient dF/dA at k/m A multiplied by k/m (the derivative of the function "
                         "A -> F(k/m A), by the chain rule)"),
                        (plain_integrated_gradients(net, batch, l, 4, times_A=False),
                         "the mean gradient along the path, not multiplied by A_l"),
                        (plain_integrated_gradients(net, batch, l, 4) * 4,
                         "A_l times the sum of the m steps' gradients, not divided by m"),
                        (plain_integrated_gradients(net, batch, l, 4, relabel=True),
                         "the gradients of F for each step's own predicted class (pseudo labels taken anew at every "
                         "point k/m A_l), not for the unscaled forward's pseudo labels, the same at every k")]:
        if torch.allclose(yours, other, rtol=0, atol=1e-10) and not torch.allclose(
                yours, plain_integrated_gradients(net, batch, l, 4), rtol=0, atol=1e-10):
            true(False, f"integrated gradients of layer {l} at m = 4 are {said}; expected Eq. 3: A_l / m times the sum "
                 "over k of F's gradient at the point k/m A_l of the path")
    with torch.no_grad():
        F1, F0 = (forward_scaled(net, batch, l, s)[0].gather(1, c[:, None]).squeeze(1) for s in (1.0, 0.0))
    errors = []
    for m in (1, 4, 16, 64):
        B_l = addrop.attribute(net, batch, [l], "iga", m=m)[l]
        errors.append((B_l.sum((1, 2, 3)) - (F1 - F0)).abs().max().item())
    said = ", ".join(f"{e:.1e}" for e in errors)
    true(all(later < earlier / 2 for earlier, later in zip(errors, errors[1:])),
         f"the completeness error of integrated gradients, max |sum of B_l - (F(A) - F(0))|, at m = 1, 4, 16, 64: "
         f"{said}; expected it to shrink more than 2x each time m grows 4x")
    size = (F1 - F0).abs().max().item()
    true(errors[-1] < 0.02 * size, f"the completeness error at m = 64 is {errors[-1]:.1e}, {errors[-1] / size:.1%} "
         f"of the path's size max |F(A) - F(0)| = {size:.1e}; expected below 2% (about 1/64)")


@pytest.mark.exercise(4, 8)
def test_one_step_integrated_gradient_is_attention_times_gradient():
    """Lesson 4. With m = 1 the Riemann sum has the single point a = 1, so Eq. 3 collapses to
    A_l * dF/dA_l at A_l itself: integrated gradients with one step is gradient x input."""
    net, batch = tiny_model(), padded_batch()
    attns = run(net, batch)[1]
    ga = addrop.attribute(net, batch, ALL, "ga")
    iga = addrop.attribute(net, batch, ALL, "iga", m=1)
    c = pseudo_labels(net, batch)
    for l in ALL:
        logits, A0 = forward_scaled(net, batch, l, 0.0)  # layer l's map scaled to 0: the path's start
        at_zero = attns[l].detach() * torch.autograd.grad(logits.gather(1, c[:, None]).sum(), A0)[0]
        true(not (torch.allclose(iga[l], at_zero, rtol=0, atol=1e-12) and (at_zero - ga[l] * attns[l]).abs().max() > 1e-6),
             f"layer {l}: integrated gradients with m = 1 equal A_l times the gradient at the zero map, the start of "
             "the path (k = 0: a left Riemann sum); expected A_l times the gradient at A_l itself: Eq. 3's sum runs "
             "k = 1..m, its last point the map itself")
        close(iga[l], attns[l].detach() * ga[l], f"layer {l}: integrated gradients with m = 1, against "
              "A_l * dF/dA_l (gradient x input)", atol=1e-12)


def plain_integrated_gradients(net, batch, l, m, weight=lambda a: 1, times_A=True, relabel=False):
    """Eq. 3 as the authors run it: m full forwards from the embeddings, layer l's attention
    scaled by k/m, one autograd call each (each step's gradient times weight(k/m): 1 in Eq. 3; and the
    mean times A_l: times_A=False leaves that out; relabel=True, a slip: each step's own prediction)."""
    c = pseudo_labels(net, batch)
    total = 0
    for k in range(1, m + 1):
        logits, A_scaled = forward_scaled(net, batch, l, k / m)
        c = logits.detach().argmax(-1) if relabel else c
        total = total + weight(k / m) * torch.autograd.grad(logits.gather(1, c[:, None]).sum(), A_scaled)[0]
    return (run(net, batch)[1][l].detach() if times_A else 1) * total / m


@pytest.mark.exercise(8)
def test_batched_integrated_gradients_equal_the_plain_loop():
    """Lesson 5. addrop computes Eq. 3 faster without changing a number: the layers below l do not
    depend on the scale, so their output is computed once, and the m steps run as one batch of
    m*B copies (a large ig_budget), or one step per chunk (ig_budget = 1). Called directly under
    torch.no_grad() (an evaluation loop, a notebook cell), integrated_gradients gives the same numbers:
    it turns gradients on where it takes them, whoever called it."""
    net, batch = tiny_model(), padded_batch()
    plain = [plain_integrated_gradients(net, batch, l, m=8) for l in ALL]
    for ig_budget in (2**30, 1):
        fast = addrop.attribute(net, batch, ALL, "iga", m=8, ig_budget=ig_budget)
        for l in ALL:
            close(fast[l], plain[l], f"layer {l}: integrated gradients (m = 8, ig_budget {ig_budget}), against 8 "
                  f"plain forwards with layer {l}'s A scaled by k/8 and one autograd call each", atol=1e-10)
    with torch.no_grad():
        try:
            direct = addrop.integrated_gradients(net, batch, ALL, None, False, 8)
        except RuntimeError as e:
            true(False, "integrated_gradients called directly under torch.no_grad() (as an evaluation loop or a "
                 f"notebook may call it) raised {str(e).splitlines()[0]!r}; expected B_l, the same as without "
                 "no_grad: it turns gradients on where it takes them, torch.enable_grad() (the contract)")
    for l in ALL:
        close(direct[l], plain[l], f"layer {l}: integrated gradients called directly under torch.no_grad() (m = 8), "
              "against the plain loop", atol=1e-10)

# -----------------------------------------------------------------------------
# 6-9. the mask

def mask_of_row(row, attention_mask, p, q, low=False):
    """drop_mask on a batch of one example whose T query rows all carry the same score row;
    the rows of the real queries (T', T). Padding queries' rows must come back empty: their
    output reaches no real position, so masking them would change nothing."""
    T, real = len(row), torch.tensor(attention_mask).bool()
    scores = torch.tensor(row, dtype=torch.float64).expand(1, 1, T, T)  # (B=1, H=1, T, T)
    M = addrop.drop_mask(scores, torch.tensor([attention_mask]), p, q, low=low)
    true(M.shape == (1, 1, T, T) and M.dtype == torch.bool,
         f"drop_mask gave a {M.dtype} mask of shape {tuple(M.shape)}; expected torch.bool, (B, H, T, T) = (1, 1, {T}, {T})")
    M = M[0, 0]  # (T, T)
    padding = torch.nonzero(M[~real].any(-1)).flatten() + int(real.sum())
    true(not M[~real].any(), f"drop_mask (p = {p}, q = {q}) dropped keys in the rows of the padding "
         f"queries at {keys(padding.tolist(), 'query')}; expected those rows left alone")
    return M[real]


def dropped_keys(M):
    """The set of dropped key positions, the same in every row here."""
    rows = {tuple(torch.nonzero(r).flatten().tolist()) for r in M}
    true(len(rows) == 1, f"drop_mask dropped different keys ({'; '.join(keys(r) for r in sorted(rows))}) in rows "
         "that carry the same scores; expected the same keys in every row")
    return set(rows.pop())


def slipped_row(row, real, gots):
    """What a worked row's wrong drops at q = 1 (gots: p -> the set of keys dropped) match at every p, in
    words, or '': Eq. 6's candidates read one place off or strictly above the threshold, at int(n p) (p and
    1 - p swapped), padding counted in n, or none at all."""
    real_keys = {j for j, r in enumerate(real) if r}

    def region(scores, n, p, strict=False, shift=0, swap=False):
        idx = n * round((p if swap else 1 - p) * 10**6) // 10**6 + shift
        if idx >= n:
            return set()
        b_hat = sorted(scores)
        cand = {j for j in real_keys if (row[j] > b_hat[idx] if strict else row[j] >= b_hat[idx])}
        return set() if cand == real_keys else cand  # the guard: a row that would lose every real key
    real_scores, n = [row[j] for j in sorted(real_keys)], len(real_keys)
    slips = [(lambda p: region(real_scores, n, p, shift=1), "the threshold read one place higher, b^[int(n (1 - p)) + 1]"),
             (lambda p: region(real_scores, n, p, shift=-1) if p < 1 else set(),
              "the threshold read one place lower, b^[int(n (1 - p)) - 1]"),
             (lambda p: region(real_scores, n, p, strict=True), "candidates strictly above b^[int(n (1 - p))], not at or above"),
             (lambda p: region(real_scores, n, p, swap=True), "the threshold read at b^[int(n p)], p and 1 - p swapped "
              "(p is the share of the row at or above the threshold, the candidates)"),
             (lambda p: set(), "no drop at all, as if every coin came up keep at q = 1"),
             (lambda p: region(real_scores + [float("-inf")] * (len(row) - n), len(row), p),
              "padding counted in n, sorted below every real key (n is the real keys alone)"),
             (lambda p: region(real_scores + [float("inf")] * (len(row) - n), len(row), p),
              "padding counted in n, sorted above every real key (n is the real keys alone)"),
             (lambda p: region(row, len(row), p), "padding counted in n and sorted with its own scores (n is the "
              "real keys alone)")]
    names = [name for slip, name in slips if gots and all(slip(p) == got for p, got in gots.items())]
    return f" (at every p of this lesson, your drops are those of {' or of '.join(names)})" if names else ""


def tried(row, real, ps):
    """{p: the keys drop_mask drops in the worked row at q = 1} for each p of ps at which it returns a mask of
    one set of keys a row: the drops a failure names a pattern in (a p at which the answer fails otherwise
    is left out)."""
    gots = {}
    for p in ps:
        try:
            gots[p] = dropped_keys(mask_of_row(row, real, p, q=1))
        except Exception:  # noqa: BLE001  any failure there is another lesson's to say
            pass
    return gots


@pytest.mark.exercise(5, 6)
def test_mask_by_hand():
    """Lesson 6. Eq. 6-7 on one row, worked by hand: the candidates are the real keys scoring at or
    above b^[int(n(1-p))], the row's real scores sorted ascending. q = 1 drops exactly them, q = 0
    nothing. Padding is never a candidate, whatever its score."""
    # keys 4 and 5 are padding (9.0 would be the top score): n = 4, b^ = [0.1, 0.3, 0.5, 0.9]
    #   p     int(n(1-p))   threshold b^[idx]   candidates (keys)
    #   0     4             past the end        none
    #   0.25  3             0.9                 {1}
    #   0.5   2             0.5                 {1, 3}
    #   0.75  1             0.3                 {0, 1, 3}
    #   1.0   0             0.1                 {0, 1, 2, 3}: every real key. Dropping them all would leave
    #                                           the query nothing to attend to (a row of -inf is NaN after
    #                                           softmax), so addrop keeps such a row whole: nothing dropped
    row, real = [0.3, 0.9, 0.1, 0.5, 9.0, -9.0], [1, 1, 1, 1, 0, 0]
    said = "scores 0.3, 0.9, 0.1, 0.5 (keys 4, 5 padding, scored 9 and -9)"
    worked = [(0, set()), (0.25, {1}), (0.5, {1, 3}), (0.75, {0, 1, 3}), (1.0, set())]
    for p, candidates in worked:  # p in increasing order, each checked before the next is tried
        got = dropped_keys(mask_of_row(row, real, p, q=1))
        why = ("every real key is a candidate, and a row that would lose them all keeps them all" if p == 1 else
               "the real keys scoring at or above b^[int(n (1 - p))], each dropped as q = 1 (True = dropped; a "
               "candidate is dropped with probability q)")
        true(got == candidates, f"{said}, p = {p}, q = 1: dropped {keys(got)}; expected {keys(candidates)}: {why}"
             + ("" if got == candidates else slipped_row(row, real, tried(row, real, [p for p, _ in worked]))))
        got = dropped_keys(mask_of_row(row, real, p, q=0))
        true(got == set(), f"{said}, p = {p}, q = 0: dropped {keys(got)}; expected none: q = 0 drops nothing (True = dropped; a candidate is "
             "dropped with probability q)")
    # int(n (1 - p)) is the floor: n = 10, p = 0.33, n (1 - p) = 6.7, index 6, b^[6] = 6: the four keys scoring 6-9
    ten = [5, 2, 7, 0, 9, 4, 8, 1, 6, 3]
    got = dropped_keys(mask_of_row(ten, [1] * 10, 0.33, q=1))
    rounded = " (yours are those of index 7, n (1 - p) rounded)" * (got == {2, 4, 6})
    true(got == {2, 4, 6, 8}, f"ten keys scored 5, 2, 7, 0, 9, 4, 8, 1, 6, 3, p = 0.33, q = 1: dropped {keys(got)}; "
         f"expected key indices 2, 4, 6, 8, scored 6-9: int(n (1 - p)) = int(6.7) = 6, the floor{rounded}")
    # the mirror strategy of Section 2.2 (low=True) takes the LOWEST scores; padding (-9.0) still never
    got = dropped_keys(mask_of_row(row, real, 0.5, q=1, low=True))
    true(got == {0, 2}, f"{said}, low=True, p = 0.5, q = 1: dropped {keys(got)}; expected key indices 0, 2, the lowest "
         "real scores (Section 2.2's mirror strategy)")
    # as many as the high strategy's candidates: n - int(n (1 - p)) = 4 - int(2.8) = 2 at p = 0.3, not int(n p) = 1
    got = dropped_keys(mask_of_row(row, real, 0.3, q=1, low=True))
    true(got == {0, 2}, f"{said}, low=True, p = 0.3, q = 1: dropped {keys(got)}; expected key indices 0, 2: the "
         "mirror strategy takes as many candidates as the high one, n - int(n (1 - p)) = 4 - int(2.8) = 2, the lowest")
    # ... on a row where that count is not int(n (1 - p)): n = 10, p = 0.6, high takes 10 - 4 = 6, so low takes
    # the six lowest (scores 0-5), not the int(n (1 - p)) = 4 below the high strategy's threshold b^[4] = 4
    got = dropped_keys(mask_of_row(ten, [1] * 10, 0.6, q=1, low=True))
    below = " (yours took int(n (1 - p)) = 4, the keys below the high strategy's threshold)" * (got == {1, 3, 7, 9})
    true(got == {0, 1, 3, 5, 7, 9}, f"ten keys scored 5, 2, 7, 0, 9, 4, 8, 1, 6, 3, low=True, p = 0.6, q = 1: dropped "
         f"{keys(got)}; expected key indices 0, 1, 3, 5, 7, 9, the six lowest scores: the mirror strategy takes as "
         f"many candidates as the high one, n - int(n (1 - p)) = 10 - 4 = 6{below}")
    # the float trap: 10 * (1 - 0.9) = 0.9999999999999998, whose int() is 0, which would make all ten
    # keys candidates; the intended index is 1: every key but the lowest (key 3) is dropped
    got = dropped_keys(mask_of_row(ten, [1] * 10, 0.9, q=1))
    true(got == set(range(10)) - {3}, f"ten keys scored 5, 2, 7, 0, 9, 4, 8, 1, 6, 3, p = 0.9, q = 1: dropped "
         f"{keys(got)}; expected every key but the lowest, key index 3: int(n (1 - p)) is 1, though in floating point "
         "10 * (1 - 0.9) is 0.9999999999999998")
    # ties at the threshold are all candidates ("at or above" b^[idx]): n = 6, p = 0.5, b^[3] = 2
    got = dropped_keys(mask_of_row([1, 2, 2, 2, 3, 0], [1] * 6, 0.5, q=1))
    true(got == {1, 2, 3, 4}, f"scores 1, 2, 2, 2, 3, 0, p = 0.5, q = 1: dropped {keys(got)}; expected key indices 1-4: "
         "every key at or above b^[3] = 2, the ties included")
    # ... and with low=True the mirror: the three lowest (scores 0, 1, 2) and every key tied with the highest of them
    got = dropped_keys(mask_of_row([1, 2, 2, 2, 3, 0], [1] * 6, 0.5, q=1, low=True))
    true(got == {0, 1, 2, 3, 5}, f"scores 1, 2, 2, 2, 3, 0, low=True, p = 0.5, q = 1: dropped {keys(got)}; expected key "
         "indices 0-3 and 5: the three lowest scores (0, 1, 2) and every key tied with the highest of them, 2")


@pytest.mark.exercise(5)
def test_threshold_index_is_exact_on_long_rows():
    """Lesson 6b. int(n(1-p)) must be exact for every real length, not only short ones: with
    n = 75 and p = 0.16, n(1-p) = 63, so exactly 75 - 63 = 12 distinct keys are candidates. And for every p
    to 6 decimals (the contract), not to fewer: n = 100, p = 0.123456, n(1-p) = 87.6544, so 13 are."""
    got = dropped_keys(mask_of_row([float(j) for j in range(75)], [1] * 75, 0.16, q=1))
    true(got == set(range(63, 75)), f"75 keys scored 0 to 74, p = 0.16, q = 1: dropped {keys(got)}; expected "
         "key indices 63-74: n (1 - p) = 63 exactly")
    got = dropped_keys(mask_of_row([float(j) for j in range(100)], [1] * 100, 0.123456, q=1))
    true(got == set(range(87, 100)), f"100 keys scored 0 to 99, p = 0.123456, q = 1: dropped {keys(got)}; expected "
         "key indices 87-99: n (1 - p) = 87.6544, int() 87, with p taken to its 6 decimals"
         + " (yours are those of p = 0.12, p rounded to 2 decimals)" * (got == set(range(88, 100))))


def paper_candidates(scores, attention_mask, p):
    """Eq. 6 taken literally, one row at a time: sort the row's real scores ascending (padding pushed to the
    end), and every real key at or above b^[int(n(1-p))] is a candidate (the int() nudged by 1e-6 past float
    error). (B, H, T, T) bool; rows of padding queries have none. No coin and no guard: those come after."""
    B, H, T, _ = scores.size()
    C = torch.zeros(B, H, T, T, dtype=torch.bool)
    for b in range(B):
        real = attention_mask[b].bool()
        n = int(real.sum())
        idx = int(n * (1 - p) + 1e-6)
        if idx == n:
            continue
        for h in range(H):
            for i in torch.nonzero(real).flatten().tolist():  # the real queries
                b_hat = torch.sort(scores[b, h, i].masked_fill(~real, INF)).values  # ascending
                C[b, h, i] = (scores[b, h, i] >= b_hat[idx]) & real  # Eq. 6 sets s = 1 BELOW b^[idx]
    return C


def paper_mask(scores, attention_mask, p, q):
    """Eq. 6-7 literally at q = 0 (nothing dropped) or q = 1 (every candidate dropped), where no coin decides,
    with addrop's guard: a real query's row that would lose every real key keeps them all."""
    assert q in (0, 1)
    M = paper_candidates(scores, attention_mask, p) if q == 1 else torch.zeros(scores.shape, dtype=torch.bool)
    lost = (M | ~attention_mask.bool()[:, None, None, :]).all(-1, keepdim=True)  # (B, H, T, 1)
    return M & ~lost


@pytest.mark.exercise(5, 6)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("q", [0, 0.1, 0.5, 1])
@pytest.mark.parametrize("p", [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1])
def test_fast_selection_equals_the_paper_recipe(p, q, ties):
    """Lesson 7. drop_mask must give Eq. 6-7 taken literally, row by row, on every row of a batch: exactly
    where no coin decides (q = 0: nothing dropped; q = 1: every candidate dropped, the guard's rows whole),
    and at 0 < q < 1 only candidates, no real query left without a real key, no padding touched (lessons 8
    and 8b check the coins themselves). Scores are continuous, or integers 0..3 so that ties at the
    threshold are common."""
    torch.manual_seed(0)
    scores = torch.randint(0, 4, (4, 3, 9, 9)).double() if ties else torch.randn(4, 3, 9, 9, dtype=torch.float64)
    attention_mask = (torch.arange(9) < torch.tensor([9, 7, 4, 2])[:, None]).long()
    torch.manual_seed(1)
    fast = addrop.drop_mask(scores, attention_mask, p, q)
    said = f"drop_mask(p = {p}, q = {q}) on {'integer scores with ties' if ties else 'continuous scores'}"
    true(fast.shape == scores.shape and fast.dtype == torch.bool,
         f"{said}: a {fast.dtype} mask of shape {tuple(fast.shape)}; expected torch.bool, {tuple(scores.shape)}")
    real = attention_mask.bool()
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T) real (query, key) pairs
    outside = int((fast & ~pairs).sum())
    true(not outside, f"{said}: it drops {outside} positions in rows of padding queries or on padding keys; expected "
         "none there: only real (query, key) pairs are dropped")
    lost = int(((fast | ~real[:, None, None, :]).all(-1) & real[:, None, :]).sum())  # real queries left no key
    true(not lost, f"{said}: it drops every real key in {lost} rows of real queries (each -inf throughout: NaN after "
         "the softmax); expected such rows whole: a row that would lose every real key keeps them all")
    if q in (0, 1):
        paper = paper_mask(scores, attention_mask, p, q)
        extra, missing = int((fast & ~paper).sum()), int((paper & ~fast).sum())
        cleared = int((paper.any(-1) & ~fast.any(-1)).sum())  # rows the recipe drops in, with no drop in yours
        true(extra == missing == 0, f"{said}, against Eq. 6-7 taken literally, row by row (at q = {q} no coin "
             f"decides): it drops {extra} positions the recipe keeps and keeps {missing} that it drops, of "
             f"{paper.numel()}" + (f", among them {cleared} whole rows with no drop at all, rows that keep some real "
             "key in the recipe (none of them a row that would lose every real key)" if cleared else "") +
             "; expected the same mask. " + ("At q = 0 nothing is dropped" if q == 0 else
             "At q = 1 every candidate is dropped: the real keys at or above b^[int(n (1 - p))] (True = dropped)"))
        return
    stray = int((fast & ~paper_candidates(scores, attention_mask, p)).sum())
    true(not stray, f"{said}: it drops {stray} positions that are not candidates of Eq. 6 (real keys at or above "
         "b^[int(n (1 - p))]); expected drops among the candidates only")


@pytest.mark.exercise(5, 6)
@pytest.mark.parametrize("ties", [False, True])
def test_gpu_path_takes_the_same_decisions(ties, monkeypatch):
    """Lesson 7b. On a GPU and under torch.compile no step may read a number back to the CPU (model.sync_free(device)
    is True there), so the real code takes another path there: it sorts each row where an eager CPU selects
    (kthvalue, which reads its k back), and draws its coins one uniform per entry. Both paths must take the same
    decisions. Here sync_free is forced True on this CPU (in addrop and in model), and drop_mask at q = 0 and at
    q = 1, where no coin decides, must give Eq. 6-7 taken literally, row by row, as lesson 7 checks on the eager
    path, for p from 0.1 to 1, on rows of 9, 7, 4 and 2 real keys of 9."""
    torch.manual_seed(0)
    scores = torch.randint(0, 4, (4, 3, 9, 9)).double() if ties else torch.randn(4, 3, 9, 9, dtype=torch.float64)
    attention_mask = (torch.arange(9) < torch.tensor([9, 7, 4, 2])[:, None]).long()
    kind = "integer scores with ties" if ties else "continuous scores"
    P = (0.1, 0.3, 0.5, 0.7, 0.9, 1)
    eager = {p: addrop.drop_mask(scores, attention_mask, p, 1) for p in P}
    monkeypatch.setattr(addrop, "sync_free", lambda device: True)
    monkeypatch.setattr(model, "sync_free", lambda device: True)
    for p in P:
        for q in (0, 1):
            gpu = addrop.drop_mask(scores, attention_mask, p, q)
            paper = paper_mask(scores, attention_mask, p, q)
            true(gpu.shape == paper.shape and gpu.dtype == torch.bool, f"drop_mask(p = {p}, q = {q}) with "
                 f"model.sync_free(device) True: a {gpu.dtype} mask of shape {tuple(gpu.shape)}; expected torch.bool, "
                 f"{tuple(paper.shape)}")
            extra, missing = int((gpu & ~paper).sum()), int((paper & ~gpu).sum())
            eager_right = q == 1 and torch.equal(eager[p], paper)
            true(extra == missing == 0, f"drop_mask(p = {p}, q = {q}) on {kind} with model.sync_free(device) True "
                 "(the path a GPU and torch.compile take, forced here on the CPU), against Eq. 6-7 taken literally, "
                 f"row by row: it drops {extra} positions the recipe keeps and keeps {missing} that it drops, of "
                 f"{paper.numel()}; expected the same mask"
                 + ("; on the eager path (sync_free False) it gives the recipe's mask: the two paths must take the "
                    "same decisions" if eager_right else ""))


@pytest.mark.parametrize("prob", [0.02, 0.2, 0.6])
def test_bernoulli_draws(prob):
    """Lesson 8a. The u of Eq. 7 is a field of independent coin flips. addrop.bernoulli draws it
    by the gaps between heads (Geometric(prob)) when heads are rare, a tenth of the random
    numbers at q = 0.1, and one uniform per entry above prob = 0.25. Either way each draw of 6
    entries must follow the law of 6 independent Bernoulli(prob): the number of heads is
    Binomial(6, prob), each entry and each neighbouring pair is set with probability prob and
    prob^2 (all to 5 sigma over 10000 draws). Six entries are few enough that the gap sampler
    often runs out of gaps and needs its second round (2% of draws at 0.2, 11% at 0.02)."""
    g = torch.Generator().manual_seed(0)
    N, n = 10000, 6
    x = torch.stack([addrop.bernoulli((2, 3), prob, generator=g).flatten() for _ in range(N)]).double()  # (N, 6)
    heads = x.sum(1)
    for k in range(n + 1):
        pk = math.comb(n, k) * prob**k * (1 - prob) ** (n - k)
        seen, sigma5 = (heads == k).sum().item(), 5 * math.sqrt(N * pk * (1 - pk)) + 1
        true(abs(seen - N * pk) <= sigma5, f"bernoulli((2, 3), {prob}): {seen} of {N} draws have {k} heads; expected "
             f"{N * pk:.0f} +- {sigma5:.0f} (Binomial(6, {prob}), 5 sigma)")
    for observed, pr, what in [(x.mean(0), prob, "each entry"), ((x[:, 1:] * x[:, :-1]).mean(0), prob**2, "each pair")]:
        sigma5 = 5 * math.sqrt(pr * (1 - pr) / N)
        worst = (observed - pr).abs().max().item()
        true(worst <= sigma5, f"bernoulli((2, 3), {prob}): {what} of neighbours set with a frequency up to {worst:.4f} "
             f"away from {pr:.4f}; expected within {sigma5:.4f} (5 sigma)")
    # exact ends, and a seeded generator repeats itself
    true(not addrop.bernoulli((50, 50), 0.0).any() and addrop.bernoulli((50, 50), 1.0).all(),
         "bernoulli with probability 0 or 1 is not all False or all True")
    draw = [addrop.bernoulli((64, 64), prob, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    same(draw[0], draw[1], f"two draws of bernoulli((64, 64), {prob}) from generators seeded alike")


@pytest.mark.exercise(5)
@pytest.mark.parametrize("p, q", [(0.3, 0.5), (0.6, 0.8), (0.9, 0.3), (0.7, 0.1)])
def test_dropped_fraction_matches_expectation(p, q):
    """Lesson 8. With continuous scores (no ties) a row of n real keys has exactly n - int(n(1-p))
    candidates, each dropped independently with probability q. So over all real (query, key) pairs
    the dropped count is Binomial(N, q), N the number of candidate pairs, and the fraction is
    q * N / (pairs) ~ p * q. Lengths >= 10 keep int(n(1-p)) >= 1, so the guard never fires."""
    torch.manual_seed(0)
    B, H, T = 64, 4, 20
    n = torch.randint(10, T + 1, (B,))
    attention_mask = (torch.arange(T) < n[:, None]).long()
    M = addrop.drop_mask(torch.randn(B, H, T, T, dtype=torch.float64), attention_mask, p, q)
    pairs = (attention_mask[:, None, :, None] * attention_mask[:, None, None, :]).bool()  # (B, 1, T, T)
    dropped = (M & pairs).sum().item()
    N = sum(H * k * (k - int(k * (1 - p) + 1e-6)) for k in n.tolist())  # candidate pairs
    sigma5 = 5 * math.sqrt(N * q * (1 - q))
    true(abs(dropped - q * N) < sigma5, f"drop_mask(p = {p}, q = {q}) on {B} rows of 10-20 real keys: dropped "
         f"{dropped} real pairs; expected q x {N} candidates = {q * N:.0f} +- {sigma5:.0f} (5 sigma)"
         + (" (near q N: coins shared along an axis swing the count this far around it, where independent ones "
            "do not; lesson 8b checks each axis)" * (abs(dropped - q * N) < 5 * sigma5)))
    # dropped_fraction divides two integer counts into a float32: equal to float32 precision
    close(addrop.dropped_fraction([M], attention_mask).item(), dropped / (H * pairs.sum().item()),
          "dropped_fraction, against the dropped real pairs counted over all real pairs", atol=1e-6)


AXES = (("example", "examples"), ("head", "heads"), ("query", "queries"), ("key", "keys"))


def fair_coins(said, M, where, rate):
    """The drops of M (B, H, T, T) at the positions `where` (bool, broadcastable) must look like independent coins,
    each True with probability `rate`: the share of those positions dropped; along each axis the share of
    neighbouring pairs (both in `where`) dropped together, rate^2 for independent coins and rate for one coin
    shared along that axis; and the spread of each row's count of drops, binomial for independent coins (a
    fixed count a row, as a top-k of random scores gives, has less); each within 6 sigma of its law."""
    where = where.expand_as(M)
    n = int(where.sum())
    share, sigma = (M & where).sum().item() / n, math.sqrt(rate * (1 - rate) / n)
    true(abs(share - rate) <= 6 * sigma, f"{said}: dropped {share:.3f} of the {n} positions where each is dropped "
         f"with probability {rate:g}; expected {rate:g} +- {6 * sigma:.3f} (6 sigma)")
    for axis, (name, names) in enumerate(AXES):
        a, b = (x.narrow(axis, 0, M.size(axis) - 1) for x in (M, where)), \
               (x.narrow(axis, 1, M.size(axis) - 1) for x in (M, where))
        (Ma, wa), (Mb, wb) = a, b
        both = wa & wb
        k = int(both.sum())
        together, sigma = (Ma & Mb & both).sum().item() / k, math.sqrt(rate**2 * (1 - rate**2) / k)
        true(abs(together - rate**2) <= 6 * sigma, f"{said}: of {k} pairs of positions next to each other along the "
             f"{name} axis, {together:.3f} were dropped together; expected {rate**2:.3f} +- {6 * sigma:.3f} (6 sigma) "
             f"for independent coins (one coin shared along the {names} would give {rate:g})")
    # each row's count x of drops among its c positions: binomial(c, rate), so the squares (x - c rate)^2 sum to
    # S with mean sum c r (1 - r) and variance sum (mu4 - var^2), mu4 = c r (1 - r) (1 + 3 (c - 2) r (1 - r))
    c, x = where.sum(-1).double(), (M & where).sum(-1).double()
    v = c * rate * (1 - rate)
    S, var_S = ((x - c * rate) ** 2).sum().item(), (v * (1 + 3 * (c - 2) * rate * (1 - rate)) - v**2).sum().item()
    true(abs(S - v.sum().item()) <= 6 * math.sqrt(var_S), f"{said}: each row's count of drops spreads by "
         f"{math.sqrt(S / c.numel()):.2f} (root mean square about its mean); expected {math.sqrt(v.mean().item()):.2f} "
         f"(6 sigma: {S / v.sum().item():.2f} x the binomial variance, against 1 +- "
         f"{6 * math.sqrt(var_S) / v.sum().item():.2f}): independent coins make the count binomial, and a fixed "
         "number a row (the top k of random scores, say) makes it spread less")


def from_the_generator(said, draw):
    """draw(generator) -> a mask; torch's default stream is seeded otherwise before each call. Generators seeded
    alike must give the same mask, whatever the default stream holds; seeded otherwise, another mask; and
    generator=None draws from torch's default stream, so that seeding it repeats the mask."""
    def with_default(seed, generator):
        torch.manual_seed(seed)
        return draw(generator)
    one = with_default(123, torch.Generator().manual_seed(0))
    two = with_default(456, torch.Generator().manual_seed(0))
    diff = int((one != two).sum())
    true(diff == 0, f"{said}: two calls with generator=torch.Generator().manual_seed(0), torch's default stream seeded "
         f"123 and then 456, gave masks that differ in {diff} of {one.numel()} positions; expected the same mask: "
         "the coin flips come from `generator` (the contract)")
    other = with_default(123, torch.Generator().manual_seed(1))
    true(not torch.equal(one, other), f"{said}: generators seeded 0 and 1 gave the same mask; expected other coin "
         "flips from another generator")
    true(torch.equal(with_default(7, None), with_default(7, None)), f"{said}: with generator=None, two calls after "
         "torch.manual_seed(7) gave different masks; expected the same: without a generator the coins come from "
         "torch's default stream")


def test_coin_flips_are_independent_and_from_the_generator():
    """Lesson 8b. Eq. 7's u is a field of independent coin flips, one per position: with every row of a batch
    carrying the same scores, the candidates are the same in every example, head and query, so a coin shared
    along any axis (one per row, one per head...) shows as neighbours dropped together too often. And the coins
    come from `generator` when one is given: a caller that wants masks that repeat apart from torch's default
    stream passes its own. How the coins are drawn is the student's: torch.rand, torch.bernoulli, or
    addrop.bernoulli (the real code's, the fastest on a CPU) all pass."""
    T, p, q = 12, 0.5, 0.5
    row = torch.randperm(T, generator=torch.Generator().manual_seed(0)).double()  # distinct scores
    scores = row.expand(16, 4, T, T)
    attention_mask = torch.ones(16, T, dtype=torch.long)
    cand = row >= T // 2  # n = 12, int(12 (1 - 0.5)) = 6: the keys scoring 6 to 11
    torch.manual_seed(0)
    M = addrop.drop_mask(scores, attention_mask, p, q)
    said = f"drop_mask(p = {p}, q = {q}) on 16 x 4 x 12 rows of the same 12 distinct scores"
    true(M.shape == scores.shape and M.dtype == torch.bool,
         f"{said}: a {M.dtype} mask of shape {tuple(M.shape)}; expected torch.bool, {tuple(scores.shape)}")
    stray = int((M & ~cand).sum())
    true(not stray, f"{said}: dropped {stray} positions that are not candidates; expected drops among the 6 top keys only")
    fair_coins(said, M, cand, q)
    from_the_generator(f"drop_mask(p = {p}, q = {q})",
                       lambda g: addrop.drop_mask(scores, attention_mask, p, q, generator=g))


@pytest.mark.exercise(5, 6)
@pytest.mark.parametrize("p, q", [(0.5, 0.5), (1.0, 1.0)])
def test_masked_forward_stays_a_distribution(p, q):
    """Lesson 9. The second forward adds M_l inside the softmax (Eq. 1): exp(-inf) = 0, so a dropped
    key gets exactly zero attention and the rest renormalise to one. At p = q = 1 every real key is
    dropped, which would make every row NaN; the guard keeps those rows whole, so the masked
    forward is then the plain forward."""
    net, batch = tiny_model(), padded_batch()
    torch.manual_seed(0)
    masks = addrop.addrop_masks(net, batch, ALL, p, q)
    with torch.no_grad():
        logits, attns = run(net, batch, masks=masks)
        plain = run(net, batch)[0]
    said = f"the masked forward (p = {p}, q = {q})"
    true(torch.isfinite(logits).all(), f"{said} gave {int((~torch.isfinite(logits)).sum())} NaN or infinite logits; "
         "expected none")
    for l, (M, A) in enumerate(zip(masks, attns)):
        true(not A.isnan().any(), f"{said}: layer {l}'s attention has {int(A.isnan().sum())} NaN entries, from rows "
             "that lost every real key (all -inf); expected the guard to keep such rows whole")
        true(torch.all(A[M] == 0), f"{said}: {int((A[M] != 0).sum())} dropped positions of layer {l} got attention; "
             "expected exactly 0 (M_l = -inf inside the softmax)")
        close(A.sum(-1), torch.ones_like(A[..., 0]), f"{said}: the sums of layer {l}'s attention rows, against 1",
              atol=1e-12)
    if p == 1 and q == 1:
        dropped = sum(int(M.sum()) for M in masks)
        true(dropped == 0, f"p = q = 1: the masks drop {dropped} positions; expected none: at p = 1 every real key is "
             "a candidate and q = 1 drops every candidate, so every row would lose all its real keys and the guard "
             "keeps each whole (lessons 6 and 6b check the candidates, lesson 7 the guard)")
        close(logits, plain, "p = q = 1: the masked forward's logits, against the plain forward's", atol=1e-12)
    else:
        fraction = addrop.dropped_fraction(masks, batch["attention_mask"]).item()
        true(fraction > 0.1, f"{said}: dropped {fraction:.1%} of the real pairs; expected above 10% (about p q = 25%)")

# -----------------------------------------------------------------------------
# 10-14. cross-tuning, labels, regression, ablations, --layers

@pytest.mark.exercise(7)
def test_cross_tuning_schedule():
    """Lesson 10. Algorithm 1: odd epochs fine-tune plainly, even epochs run AD-DROP. Without
    cross-tuning (Table 2's ablation) every epoch runs AD-DROP."""
    got = [addrop.is_addrop_epoch(e) for e in range(1, 7)]
    said = {True: "runs AD-DROP", False: "runs the original fine-tuning"}
    off = [e for e, g in zip(range(1, 7), got) if g != (e % 2 == 0)]
    true(not off, f"is_addrop_epoch with cross-tuning, epochs 1 to 6: {got}. " + "; ".join(
         f"epoch {e}: yours {said.get(got[e - 1], f'gives {got[e - 1]!r}')}, Algorithm 1 {said[e % 2 == 0]} there"
         for e in off[:2]))
    got = [addrop.is_addrop_epoch(e, cross_tuning=False) for e in range(1, 7)]
    true(all(got), f"is_addrop_epoch for epochs 1 to 6 without cross-tuning: {got}; expected True for every epoch")


class Job(types.SimpleNamespace):
    """A stand-in for train.py's job and its flags: what a lesson sets, and None for everything else (every
    other option off: no --compile, no --save-every, no resume, no stop signal)."""

    def __getattr__(self, name):
        return None


@pytest.mark.exercise(7)
@pytest.mark.parametrize("cross_tuning", [True, False], ids=["cross-tuning", "no-cross-tuning"])
def test_train_loop_runs_addrop_in_those_epochs(cross_tuning, monkeypatch):
    """Lesson 10b. The schedule as train.py runs it: its train_epoch asks is_addrop_epoch(epoch, not
    --no-cross-tuning) once an epoch, and every step of an AD-DROP epoch is an AD-DROP step. Over a run of 5
    epochs, with cross-tuning the AD-DROP steps fall in epochs 2 and 4 only; with --no-cross-tuning, in all
    five; and a run without AD-DROP (p = 0, plain fine-tuning) has none, whatever the schedule says. The
    steps are recorded, not run (train_step is replaced by a recorder): 4 examples, 2 steps an epoch."""
    import train
    steps = []  # (epoch, AD-DROP step?) of every step train_epoch hands on

    def step(j, b, adrop):
        steps.append((j.epoch, bool(adrop)))
        return torch.zeros(()), torch.zeros(())
    monkeypatch.setattr(train, "train_step", step)
    flag = "" if cross_tuning else " --no-cross-tuning"
    for use_addrop in (True, False):
        j = Job(args=Job(no_cross_tuning=not cross_tuning, seed=0, log_interval=10**9),
                splits={"train": Job(enc=[([1, 5, 6, 2], [0, 0, 0, 0])] * 4, y=[0, 1, 0, 1])},
                batch_size=2, pad_id=0, step=0, total_steps=10**9, use_addrop=use_addrop, device=torch.device("cpu"),
                world=1, stop=Job())
        steps.clear()
        for epoch in range(1, 6):
            j.epoch = epoch
            train.train_epoch(j, epoch)
        got = sorted({e for e, adrop in steps if adrop})
        want = ([2, 4] if cross_tuning else [1, 2, 3, 4, 5]) if use_addrop else []
        plain = sorted({e for e, adrop in steps if not adrop})
        true(len(steps) == 10, f"train.py's loop ran {len(steps)} steps over 5 epochs of 4 examples, 2 a batch; expected 10")
        true(got == want and not set(got) & set(plain), f"a run of 5 epochs{flag}"
             + ("" if use_addrop else " without AD-DROP (p = 0)") + f": train.py's loop ran AD-DROP steps in epochs "
             f"{got or 'none'}, plain ones in {plain or 'none'}; expected AD-DROP steps in "
             + (f"epochs {want}" if want else "none") + (": Algorithm 1 runs the original fine-tuning in odd epochs, "
                                                         "AD-DROP in even ones" if cross_tuning and use_addrop else
                                                         ": Table 2's ablation runs AD-DROP in every epoch"
                                                         if use_addrop else ": plain fine-tuning has no AD-DROP epoch"))


@pytest.mark.exercise(2, 3, 4, 8)
@pytest.mark.parametrize("method", ["ga", "iga"])
def test_gold_labels_differ_only_where_the_model_is_wrong(method):
    """Lesson 11. The paper attributes the pseudo label (the prediction, Eq. 4), not the gold one.
    Examples do not interact, so each example's B depends on its own label only: gold and pseudo
    attributions are identical where the model is right and differ where it is wrong."""
    net, batch = tiny_model(), padded_batch()
    pred = pseudo_labels(net, batch)
    wrong = torch.tensor([False, True, False, True])
    gold = torch.where(wrong, (pred + 1) % 3, pred)
    pseudo = addrop.attribute(net, batch, ALL, method, m=4)
    golden = addrop.attribute(net, batch, ALL, method, labels=gold, m=4)
    for l in ALL:
        diff = (pseudo[l] - golden[l]).abs().flatten(1).amax(1)  # per example, (B,)
        true(torch.all(diff[~wrong] < 1e-12), f"{method}, layer {l}: B_l of the gold labels differs from B_l of the "
             f"pseudo labels by up to {diff[~wrong].max():.1e} on examples 0 and 2, where the gold label is the "
             "prediction; expected the same (1e-12): each example's B depends on its own label only")
        true(torch.all(diff[wrong] > 1e-4), f"{method}, layer {l}: B_l of the gold labels differs from B_l of the "
             f"pseudo labels by only {diff[wrong].min():.1e} on examples 1 and 3, where the gold label is not the "
             "prediction; expected more than 1e-4: B of a label other than the prediction differs from B of the prediction")


@pytest.mark.exercise(3, 4)
def test_regression_attributes_the_negative_loss():
    """Lesson 12. A regression head (STS-B, one output) has no class to pick, so the attribution is
    -dL/dA with the gold score (Appendix A), L = 1/2 sum (y_hat - y)^2: positions whose attention
    lowers the loss score high."""
    net, batch = tiny_model(num_labels=1), padded_batch(regression=True)
    logits, attns = run(net, batch)
    loss = 0.5 * ((logits.squeeze(-1) - batch["labels"]) ** 2).sum()
    dA = torch.autograd.grad(loss, attns, retain_graph=True)
    B_all = addrop.attribute(net, batch, ALL, "ga", regression=True)
    every_pair = 0.5 * ((logits - batch["labels"]) ** 2).sum()  # (B, 1) minus (B,): a (B, B) table
    if all(torch.allclose(B_all[l], -g, rtol=1e-9, atol=0) for l, g in zip(ALL, torch.autograd.grad(every_pair, attns))):
        raise Wrong("the regression attribution is -dL/dA_l of L = 1/2 sum over every (prediction, label) pair: "
                    "logits (B, 1) minus labels (B,) broadcasts to (B, B), each example's prediction against every "
                    "example's score; expected L over each example with its own score (the logits' last dimension "
                    "of 1 removed first)")
    for l in ALL:
        close(B_all[l], -dA[l], f"layer {l}: the regression attribution, against -dL/dA_l, L = 1/2 sum (y^ - y)^2 "
              "with the gold scores y", atol=1e-12)


def rd_scores(attention_mask, H):
    """What attribute(method="rd") hands the random mask: equal scores (one zero), a map's shape (B, H, T, T)."""
    B, T = attention_mask.size()
    return torch.zeros((), dtype=torch.float64).expand(B, H, T, T)


@pytest.mark.exercise(6, 9)
def test_attention_and_random_ablations():
    """Lesson 13. Table 2's ablations. AA scores each position by its attention probability itself,
    so it needs no label and no layer above the highest selected one: those are not run. RD needs no
    scores (attribute hands it equal ones, for their shape): each real key is a candidate with probability
    p, dropped with probability q, so each real key is dropped independently with probability p * q: the
    count is binomial, checked to 5 sigma; padding keys are never dropped, and at p = q = 1 no real row
    loses every real key (the guard)."""
    net, batch = tiny_model(), padded_batch()
    attns = run(net, batch)[1]
    aa = addrop.attribute(net, batch, ALL, "aa")
    for l in ALL:
        same(aa[l], attns[l].detach(), f"AA's scores of layer {l}, against the attention probabilities A_l")
    ran = []  # AA of the first layer alone runs that layer only: nothing above it is read
    hooks = [layer.register_forward_hook(lambda *_, l=l: ran.append(l)) for l, layer in enumerate(net.encoder.layers)]
    first = addrop.attribute(net, batch, [0], "aa")
    for h in hooks:
        h.remove()
    true(ran == [0], f"AA of layer 0 alone ran layers {ran}; expected [0]: no layer above the highest selected one")
    same(first[0], attns[0].detach(), "AA of layer 0 alone, against A_0")

    p, q, H = 0.5, 0.2, CFG["num_attention_heads"]
    torch.manual_seed(0)
    lengths = [int(k) for k in torch.randint(4, 17, (64,))]
    big = padded_batch(lengths)
    M = addrop.random_mask(rd_scores(big["attention_mask"], H), big["attention_mask"], p, q)
    T = max(lengths)
    true(M.shape == (64, H, T, T) and M.dtype == torch.bool,
         f"random_mask gave a {M.dtype} mask of shape {tuple(M.shape)}; expected torch.bool, (B, H, T, T) = {(64, H, T, T)}")
    tokens = big["attention_mask"].bool()
    real = (tokens[:, None, :, None] & tokens[:, None, None, :]).expand(64, H, T, T)  # (real query, real key) pairs
    true(not M[~real].any(), f"random_mask dropped {int(M[~real].sum())} positions in the rows of padding queries or "
         "on padding keys; expected none: only real (query, key) pairs are dropped")
    pairs = H * sum(k * k for k in lengths)  # real (query, key) pairs, each dropped with probability p q
    dropped = addrop.dropped_fraction([M], big["attention_mask"]).item() * pairs
    sigma5 = 5 * math.sqrt(pairs * p * q * (1 - p * q))
    true(abs(dropped - p * q * pairs) < sigma5, f"random_mask(p = {p}, q = {q}) dropped {dropped:.0f} of {pairs} real "
         f"pairs; expected p q x {pairs} = {p * q * pairs:.0f} +- {sigma5:.0f} (5 sigma): each real key dropped "
         "with probability p q" + (" (yours are near q alone: every real key a candidate, as the top p of scores "
                                   "that all tie would make them)" * (abs(dropped - q * pairs) < sigma5)))
    # independently in every head too: two heads draw the same mask of a long row with probability
    # (1 - 2 p q (1 - p q))^(16 * 16) < 1e-20, so equal masks mean one draw shared by the heads
    shared = [h for h in range(1, H) if torch.equal(M[:, h], M[:, 0])]
    true(not shared, f"random_mask gave heads {shared} the same mask as head 0, over 64 rows of 4-16 real keys; "
         "expected different masks: with independent coins per head, two heads agree there with probability below 1e-20")
    # exercise 6's guard holds for RD too: at p = q = 1 every real key would go, so every row keeps them all
    M1 = addrop.random_mask(rd_scores(big["attention_mask"], H), big["attention_mask"], 1.0, 1.0)
    lost = int(((M1 | ~tokens[:, None, None, :]).all(-1) & tokens[:, None, :]).sum())
    true(not lost, f"random_mask(p = 1, q = 1) drops every real key in {lost} rows of real queries (-inf throughout: "
         "NaN after the softmax); expected such rows whole, as exercise 6's rules keep them")



@pytest.mark.exercise(9)
def test_random_mask_coins_are_independent_and_from_the_generator():
    """Lesson 13b. RD drops each real (query, key) pair independently, with probability p q: no example, head,
    query or key shares its coins with a neighbour (neighbours dropped together at (p q)^2, not p q). The coins
    come from `generator` when one is given, as drop_mask's do. One draw at p q, or a candidate at p and a coin
    at q, both pass: each real pair is dropped with probability p q either way. A fixed number of candidates a
    row (the top of random scores) does not: at q = 1 every row would lose the same count, not a binomial one.
    And the scores are read for their shape only: other scores of that shape, the same seed, the same mask."""
    attention_mask = torch.ones(16, 12, dtype=torch.long)
    scores = torch.randn(16, 4, 12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for p, q in [(0.5, 0.5), (0.6, 0.5), (0.5, 1.0)]:
        said = f"random_mask(p = {p}, q = {q}) on 16 examples of 12 real tokens, 4 heads"
        torch.manual_seed(0)
        M = addrop.random_mask(scores, attention_mask, p, q)
        true(M.shape == (16, 4, 12, 12) and M.dtype == torch.bool, f"{said}: a {M.dtype} mask of shape "
             f"{tuple(M.shape)}; expected torch.bool, (B, H, T, T) = (16, 4, 12, 12)")
        fair_coins(said, M, torch.ones(1, 1, 1, 1, dtype=torch.bool), p * q)
        from_the_generator(f"random_mask(p = {p}, q = {q})",
                           lambda g: addrop.random_mask(scores, attention_mask, p, q, generator=g))
    torch.manual_seed(0)
    other = addrop.random_mask(-scores, attention_mask, 0.5, 0.5)
    torch.manual_seed(0)
    diff = int((addrop.random_mask(scores, attention_mask, 0.5, 0.5) != other).sum())
    true(diff == 0, f"random_mask(p = 0.5, q = 0.5) on two score tensors of one shape, the second the first negated, "
         f"torch's seed 0 before each: masks that differ in {diff} of {other.numel()} positions; expected the same "
         "mask: RD has no attribution, and reads the scores for their shape only (the contract)")


def test_parse_layers():
    """Lesson 14. --layers picks where AD-DROP masks (settings.parse_layers reads it): 'first' (the
    paper's choice on the large tasks), 'all' (the small ones), or explicit indices; a bad spec is
    refused by name."""
    for spec, L_, expected in [("first", 12, [0]), ("all", 3, [0, 1, 2]), ("0,2", 3, [0, 2])]:
        got = settings.parse_layers(spec, L_)
        true(got == expected, f"parse_layers({spec!r}, {L_}) is {got}; expected {expected}")
    with pytest.raises(ValueError, match="index 3 out of range .* 3 layers"):
        settings.parse_layers("0,3", 3)
    with pytest.raises(ValueError, match="'last'.*expected 'first', 'all' or comma-separated"):
        settings.parse_layers("last", 3)

# -----------------------------------------------------------------------------
# 15-17. token-level tasks (Appendix A): one attribution from many outputs

def token_batch(seed=0):
    """The padded batch with a label per token, as train.py gives a token task: IGNORE on the
    first token (a [CLS]), on one word-continuation piece per sentence (position 2) and on padding;
    a tag in 0..2 elsewhere (only which positions are scored matters: attribution uses pseudo labels)."""
    batch = padded_batch(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    y = torch.randint(0, 3, batch["input_ids"].shape, generator=g)
    y[:, 0] = y[:, 2] = addrop.IGNORE
    batch["labels"] = y.masked_fill(batch["attention_mask"] == 0, addrop.IGNORE)
    return batch


def tiny_token_model(seed=0):
    torch.manual_seed(seed)
    net = model.Model(model.Config(**CFG), 3, token_level=True).double()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return net.eval()


def token_pseudo_labels_keep_ignore(net, batch):
    """Eq. 4 for a token task (exercise 2, _unmasked_pass with labels None): each scored token's pseudo label
    is the argmax of its logits, and a token whose batch label is IGNORE keeps IGNORE (it is no token the
    task scores, so it adds nothing to the pseudo loss)."""
    with torch.no_grad():
        logits, labels, _ = addrop._unmasked_pass(net, batch, None)
    ignored = batch["labels"] == addrop.IGNORE
    true(torch.is_tensor(labels) and labels.shape == ignored.shape, f"the pseudo labels of a token task have shape "
         f"{tuple(labels.shape) if torch.is_tensor(labels) else type(labels).__name__}; expected (B, T) = "
         f"{tuple(ignored.shape)}, one per token")
    classed = int((labels[ignored] != addrop.IGNORE).sum())
    true(classed == 0, f"the pseudo labels of a token task (_unmasked_pass, labels None): {classed} of the "
         f"{int(ignored.sum())} tokens whose batch label is IGNORE got a class; expected IGNORE kept there: "
         "Eq. 4 labels only the tokens the task scores ([CLS], word continuations and padding stay IGNORE)")
    off = int((labels[~ignored] != logits.argmax(-1)[~ignored]).sum())
    true(off == 0, f"the pseudo labels of a token task: {off} of the {int((~ignored).sum())} scored tokens are "
         "not the argmax of their logits; expected each scored token's predicted class (Eq. 4)")

@pytest.mark.exercise(2, 3, 10)
def test_token_attribution_is_eq3_summed_token_by_token():
    """Lesson 15. A token task has a logit vector F_i per token, so no single F_c~ to differentiate.
    Appendix A fuses them through the pseudo loss L = -sum_i log P(c~_i | i) (Eq. 2): B = -dL/dA
    (Eq. 1). By the chain rule through the softmax, that is (Eq. 3)
        -dL/dA = sum_i sum_c (y_ic - P_ic) dF_ic/dA,   y_i the one-hot pseudo label,
    a weighted sum of every scored token's every logit gradient. Checked here against a loop of
    autograd calls, one per (token, class), to 1e-10 in float64. The paper's Eq. 3 keeps only the
    c = c~ term, (1 - P_c~) dF_c~/dA: that is a different matrix (here off by more than 1e-3), since
    the other logits move P_c~ too. First, the pseudo labels themselves (exercise 2): IGNORE kept where the
    batch's labels have it, the argmax elsewhere; and the pseudo loss alone on 6 tokens, 2 of them IGNORE,
    whose IGNORE tokens must be no term of it."""
    net, batch = tiny_token_model(), token_batch()
    token_pseudo_labels_keep_ignore(net, batch)
    # the pseudo loss alone, on 6 tokens of which 2 are IGNORE: a term for an IGNORE token is named first
    logits6 = torch.linspace(-2, 2, 6 * 4, dtype=torch.float64).view(2, 3, 4).sin() * 3
    labels6 = torch.tensor([[1, addrop.IGNORE, 2], [addrop.IGNORE, 0, 3]])
    yours, scored = addrop.pseudo_loss(logits6, labels6), labels6 != addrop.IGNORE
    right = -logits6.log_softmax(-1)[scored].gather(1, labels6[scored][:, None]).sum()
    as_zero = -logits6.log_softmax(-1).flatten(0, 1).gather(1, labels6.clamp(min=0).flatten()[:, None]).sum()
    named_slip(yours, right, {
        "the loss with each IGNORE token counted as class 0": as_zero,
        "minus the sum of the labels' logits, not of their log-probabilities (log-softmax)":
            -logits6[scored].gather(1, labels6[scored][:, None]).sum(),
        "the loss with its sign flipped": -right,
        "the log-probabilities taken over the tokens (log_softmax on axis 1), not over the classes":
            -logits6.log_softmax(1)[scored].gather(1, labels6[scored][:, None]).sum()},
        "pseudo_loss of 6 tokens, 2 of them IGNORE",
        "the 4 scored tokens' -log P(c~_i | x, i) summed (Appendix A, Eq. 2): an IGNORE token is no term of L")
    B_all = addrop.attribute(net, batch, ALL, "ga")
    logits, attns = run(net, batch)
    P = logits.softmax(-1).detach()
    c = addrop.pseudo_labels(logits, batch)
    full = [torch.zeros_like(A) for A in attns]
    paper = [torch.zeros_like(A) for A in attns]
    for b, t in (batch["labels"] != addrop.IGNORE).nonzero().tolist():
        for k in range(3):
            dF = torch.autograd.grad(logits[b, t, k], attns, retain_graph=True)  # dF_tk/dA_l, every l
            w = float(k == c[b, t]) - P[b, t, k]  # y_ik - P_ik
            for l in ALL:
                full[l] += w * dF[l]
                if k == c[b, t]:
                    paper[l] += w * dF[l]
    n = int((batch["labels"] != addrop.IGNORE).sum())  # the scored tokens
    for l in ALL:
        true((B_all[l] * n - full[l]).abs().max() > 1e-9, f"layer {l}: the token attribution is 1/{n} of -dL/dA_l, L "
             f"the pseudo loss of the batch's {n} scored tokens (Eq. 3 summed with autograd token by token); expected "
             "-dL/dA_l itself: each scored token's term counts in full, however many tokens the batch holds (Eq. 2)")
        close(B_all[l], full[l], f"layer {l}: the token attribution -dL/dA_l, against Eq. 3 summed with autograd "
              "token by token and class by class", atol=1e-10)
    gap = max((B_all[l] - paper[l]).abs().max().item() for l in ALL)
    true(gap > 1e-3, f"the token attribution differs from the paper's Eq. 3 (its c = c~ term alone) by only "
         f"{gap:.1e}; expected more than 1e-3: the other classes move P_c~ too")


@pytest.mark.exercise(2, 3, 10)
def test_ignored_positions_change_no_attribution():
    """Lesson 16. Positions labelled IGNORE ([CLS], [SEP], word continuations, padding) are not in the
    pseudo loss. With token (0, 3) ignored too, B equals -dL/dA for L summed over the remaining
    scored tokens only (1e-12), and differs from B with (0, 3) scored: the mark is all that counts.
    What the gold label of a scored token is never matters: B uses the pseudo labels, so other gold
    tags at the same positions give the same B bit for bit. The pseudo labels keep IGNORE where the batch's
    labels have it (exercise 2), with token (0, 3) marked too."""
    net, batch = tiny_token_model(), token_batch()
    ignored = dict(batch, labels=batch["labels"].clone())
    ignored["labels"][0, 3] = addrop.IGNORE
    token_pseudo_labels_keep_ignore(net, ignored)
    B_ign = addrop.attribute(net, ignored, ALL, "ga")
    B_all = addrop.attribute(net, batch, ALL, "ga")
    logits, attns = run(net, batch)
    scored = (ignored["labels"] != addrop.IGNORE)
    c = logits.argmax(-1)
    L = -logits.log_softmax(-1).gather(-1, c[..., None]).squeeze(-1)[scored].sum()
    dA = torch.autograd.grad(L, attns)
    for l in ALL:
        close(B_ign[l], -dA[l], f"layer {l}: B_l with token (0, 3) marked IGNORE, against -dL/dA_l, L the pseudo "
              "loss summed over the other scored tokens", atol=1e-12)
    gap = max((B_ign[l] - B_all[l]).abs().max().item() for l in ALL)
    true(gap > 1e-6, f"B with token (0, 3) marked IGNORE differs from B with it scored by only {gap:.1e}; expected "
         "more than 1e-6: a token marked IGNORE leaves the pseudo loss")
    other_gold = dict(batch, labels=torch.where(batch["labels"] == addrop.IGNORE, addrop.IGNORE,
                                                (batch["labels"] + 1) % 3))
    B_other = addrop.attribute(net, other_gold, ALL, "ga")
    for l in ALL:
        same(B_other[l], B_all[l], f"layer {l}: B_l with other gold tags at the scored tokens, against B_l with the "
             "batch's own (the pseudo labels are attributed, never the gold ones)")


@pytest.mark.exercise(6, 8, 9, 10)
@pytest.mark.parametrize("method", ["iga", "aa", "rd"])
def test_token_tasks_take_every_attribution(method):
    """Lesson 17. IGA, AA and RD work for tokens as for sentences: AA and RD never read a label; IGA
    with one step is A times GA's gradient at A (its m = 1 case, as lesson 4), here through the
    pseudo loss; each gives a mask of the attention's shape that drops real pairs only."""
    net, batch = tiny_token_model(), token_batch()
    if method == "iga":
        ga = addrop.attribute(net, batch, ALL, "ga")
        iga = addrop.attribute(net, batch, ALL, "iga", m=1)
        attns = run(net, batch)[1]
        for l in ALL:
            close(iga[l], attns[l].detach() * ga[l], f"layer {l}: token IGA with m = 1, against A_l times GA's "
                  "gradient", atol=1e-12)
    mask = "random" if method == "rd" else "high"  # RD's scores all tie: its mask is the random one
    torch.manual_seed(0)
    masks = addrop.addrop_masks(net, batch, ALL, 0.5, 1.0, method, mask)
    if method in ("aa", "rd"):  # no label read: the tags scrambled, the same masks from the same seed
        scrambled = {**batch, "labels": token_batch(seed=7)["labels"]}
        torch.manual_seed(0)
        again = addrop.addrop_masks(net, scrambled, ALL, 0.5, 1.0, method, mask)
        changed = [l for l in ALL if not torch.equal(again[l], masks[l])]
        true(not changed, f"{method}'s masks of layers {changed} changed when only the batch's tags changed (same "
             "seed); expected the same: AA and RD read no label")
    real = batch["attention_mask"].bool()
    shape = run(net, batch)[1][0].shape
    for l, M in enumerate(masks):
        true(M.shape == shape, f"{method}'s mask of layer {l} has shape {tuple(M.shape)}; expected {tuple(shape)}")
        true(M.any(), f"{method}'s mask of layer {l} (p = 0.5, q = 1) drops nothing; expected drops")
        outside = int(M[~(real[:, None, :, None] & real[:, None, None, :]).expand_as(M)].sum())
        true(outside == 0, f"{method}'s mask of layer {l} drops {outside} positions outside the real (query, key) "
             "pairs; expected none")

# -----------------------------------------------------------------------------
# 18. the authors' first pass

@pytest.mark.exercise(2, 4)
@pytest.mark.parametrize("method", ["ga", "aa"])
def test_authors_first_pass_equals_ours_without_dropout(method):
    """Lesson 18. The authors' code runs the attribution pass in train mode, ordinary dropout on, and
    differentiates the attention map AFTER attention dropout (train.py --first-pass train); ours runs
    in eval mode on A itself. With every dropout rate 0 the two are the same function, so they give the
    same scores (1e-12). With dropout on, theirs is random: two draws differ, while ours repeats exactly
    (the candidate region changes from step to step in their code, and not in ours). Theirs is then the
    gradient (or AA's map) of the dropped, rescaled map that model(..., dropped_A=True) hands out in train
    mode: the same computed by hand from the same random draws (1e-12)."""
    torch.manual_seed(0)
    quiet = model.Model(model.Config(**CFG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), 3).double()
    quiet.load_state_dict(tiny_model().state_dict())
    batch = padded_batch()
    ours = addrop.attribute(quiet, batch, ALL, method)
    theirs = addrop.attribute(quiet.train(), batch, ALL, method, first_pass="train")
    true(quiet.training, "attribute(first_pass='train') handed the model back in eval mode; it came in train mode")
    for l in ALL:
        close(theirs[l], ours[l], f"{method}, layer {l}, every dropout rate 0: the authors' first pass, against ours",
              atol=1e-12)
    noisy = tiny_model()  # dropout 0.1
    torch.manual_seed(0)
    a, b = (addrop.attribute(noisy, batch, ALL, method, first_pass="train") for _ in range(2))
    c, d = (addrop.attribute(noisy, batch, ALL, method) for _ in range(2))
    gap = max((a[l] - b[l]).abs().max().item() for l in ALL)
    true(gap > 1e-6, f"{method}: two draws of the authors' first pass, dropout on, differ by only {gap:.1e}; expected "
         "more than 1e-6: train mode, and A after attention dropout")
    for l in ALL:
        same(c[l], d[l], f"{method}, layer {l}: two draws of our first pass (eval mode: no randomness)")
    true(not noisy.training, "attribute(first_pass='train') handed the model back in train mode; it came in eval mode")
    # theirs is taken with respect to A after attention dropout, rescaled: the map model(..., dropped_A=True)
    # hands out in train mode, here with the same random draws as a's
    torch.manual_seed(0)
    with torch.enable_grad():
        logits, attns = run(noisy.train(), batch, dropped_A=True)
        F = logits.gather(1, logits.argmax(-1)[:, None]).sum()
        expected = torch.autograd.grad(F, attns) if method == "ga" else [A.detach() for A in attns]
    noisy.eval()
    for l in ALL:
        close(a[l], expected[l], f"{method}, layer {l}: the authors' first pass, against the same computed on the "
              "dropped, rescaled maps of model(..., dropped_A=True) in train mode, same random draws", atol=1e-12)


def test_attribute_keeps_the_mode_and_refuses_what_it_cannot_do():
    """Lesson 18b. attribute, the entry of steps 1-2 for every method, sets the mode of the first pass (eval,
    or train for the authors') and hands the model back in the mode it came in, every module of it, whatever
    the method. The authors' first pass (train mode, each map taken after attention dropout) is offered for
    GA and AA only: integrated gradients walks the straight path from 0 to the model's own A_l, and a map with
    dropout's zeros and 1/(1 - p) on it is no point of that path. So attribute refuses IGA with
    first_pass="train", as it refuses an unknown method: ValueError, the model handed back in its mode."""
    net, batch = tiny_model(), padded_batch()
    for training in (True, False):
        mode = "train" if training else "eval"
        for method in addrop.ATTRIBUTIONS:
            for first_pass in ("eval", "train")[:1 if method == "iga" else 2]:
                net.train(training)
                addrop.attribute(net, batch, [0, 2], method, m=3, first_pass=first_pass)
                modes = {"train" if mod.training else "eval" for mod in net.modules()}
                true(modes == {mode}, f"attribute(method={method!r}, first_pass={first_pass!r}) handed the model "
                     f"back with modules in {' and '.join(sorted(modes))} mode; it came in {mode} mode, and must "
                     "leave in it")
        for method, first_pass in (("iga", "train"), ("grad", "eval")):
            net.train(training)
            try:
                addrop.attribute(net, batch, ALL, method, m=2, first_pass=first_pass)
                refused = False
            except ValueError:
                refused = True
            true(refused, f"attribute(method={method!r}, first_pass={first_pass!r}) returned scores; expected "
                 "ValueError: " + ("the authors' first pass is for ga and aa only" if method == "iga" else
                                   "no such method"))
            true(net.training == training, f"attribute(method={method!r}, first_pass={first_pass!r}) raised and "
                 f"handed the model back in {'train' if net.training else 'eval'} mode; it came in {mode} mode")

# -----------------------------------------------------------------------------
# 19-21. the masks of an AD-DROP step (Algorithm 1, lines 7-8)

def real_masks(net, batch, layers, p, q, **options):
    """The real addrop_masks (whether or not a student's stands in for it), from torch's seed 0."""
    torch.manual_seed(0)
    return impl.real(addrop, "addrop_masks")(net, batch, layers, p, q, **options)


def watched(net):
    """net with a record of its calls: [(train mode?, the masks it was given)], and the hook's handle."""
    calls = []

    def hook(module, args, kwargs):
        calls.append((module.training, args[3] if len(args) > 3 else kwargs.get("masks")))
    return calls, net.register_forward_pre_hook(hook, with_kwargs=True)


def one_entry_per_layer(said, masks, layers):
    """masks, what addrop_masks returned for `layers`, is a list of L entries: a (B, H, T, T) bool tensor at each
    selected layer, None at every other; each failure in words."""
    n = len(masks) if isinstance(masks, (list, tuple)) else None
    true(isinstance(masks, list) and n == L, f"{said} returned {type(masks).__name__}" + (f" of {n} entries" if n is not
         None else "") + f"; expected a list of {L} entries, one per layer of the model (model.cfg.num_hidden_layers), "
         "None for each layer left unmasked, those above the highest selected one too: train.py hands the list to "
         "the model, whose layer l reads entry l")
    for l, M in enumerate(masks):
        if l in layers:
            true(isinstance(M, torch.Tensor) and M.dtype == torch.bool and M.dim() == 4, f"{said}: the entry of "
                 f"layer {l}, a selected one, is {type(M).__name__ if not torch.is_tensor(M) else f'a {M.dtype} tensor of shape {tuple(M.shape)}'}; "
                 "expected its mask M_l, (B, H, T, T) bool")
        else:
            true(M is None, f"{said}: the entry of layer {l}, not selected, is {type(M).__name__}; expected None")


def equal_masks(a, b):
    return all((x is None) == (y is None) and (x is None or (x.shape == y.shape and torch.equal(x, y)))
               for x, y in zip(a, b)) and len(a) == len(b)


def order_said(said, masks, want, layers, real):
    """Where masks differ from want, the real masks: that they are the real ones drawn in another order of the
    layers, when some other order of `layers` given to real(order) (the real function, same seed) gives them."""
    if equal_masks(masks, want):
        return
    for order in itertools.permutations(layers):
        if list(order) != list(layers) and equal_masks(masks, real(list(order))):
            true(False, f"{said}: your masks are the real ones drawn in another order of the layers ({list(order)}, "
                 f"same seed); expected them drawn in the order `layers` lists them, {list(layers)} (the contract)")


@pytest.mark.exercise(11)
def test_masks_come_from_an_eval_mode_first_pass():
    """Lesson 19. Algorithm 1, lines 7-8: the first pass (the attribution) runs in eval mode, unmasked, whatever
    mode the model came in (train mode, in training), and the model goes back in that mode: line 9's forward,
    train.py's, runs in it. The masks come back as a list of one entry per layer of the model, M_l (B, H, T, T)
    bool for each selected layer and None for every other, those above the highest selected one too (layers [0]
    first, then [0, 2]). RD (method "rd", mask "random") needs no scores: no forward of the encoder runs at all
    (one would cost a forward, and in train mode draw dropout's random numbers too)."""
    net, batch = tiny_model(), padded_batch()
    for layers in ([0], [0, 2]):
        net.train()
        torch.manual_seed(0)
        one_entry_per_layer(f"addrop_masks on layers {layers}", addrop.addrop_masks(net, batch, layers, 0.5, 1.0),
                            layers)
    for training in (True, False):
        net.train(training)
        mode = "train" if training else "eval"
        calls, handle = watched(net)
        torch.manual_seed(0)
        try:
            masks = addrop.addrop_masks(net, batch, [0, 2], 0.5, 1.0)
        finally:
            handle.remove()
        true(calls, "the model never ran in addrop_masks(method='ga'); expected its first pass, the attribution's")
        seen = [("train" if t else "eval") + (" mode, with masks" if m is not None else " mode") for t, m in calls]
        true(all(s == "eval mode" for s in seen), f"the model came in {mode} mode and ran in addrop_masks(method='ga') "
             f"as: {', '.join(seen)}; expected the first pass in eval mode, unmasked (first_pass='eval': the pseudo "
             "label is the model's own prediction, with no dropout noise in the attribution)")
        true(net.training == training, f"addrop_masks handed the model back in {'train' if net.training else 'eval'} "
             f"mode; it came in {mode} mode, the mode line 9's masked forward then runs in")
        true(sum(int(M.sum()) for M in masks if M is not None) > 0, "addrop_masks(p = 0.5, q = 1) dropped nothing; "
             "expected the candidates of every selected layer dropped")
    runs = []  # RD needs no scores: the encoder does not run
    handle = net.encoder.register_forward_pre_hook(lambda module, args: runs.append(module.training))
    try:
        for first_pass in ("eval", "train"):
            runs.clear()
            net.train()
            torch.manual_seed(0)
            addrop.addrop_masks(net, batch, [0, 2], 0.5, 0.5, method="rd", mask="random", first_pass=first_pass)
            true(not runs, f"the masks with method='rd' (first_pass={first_pass!r}) ran the encoder {len(runs)} time(s); "
                 "expected never: RD draws its masks without scores, and attribute(method='rd') runs no pass")
    finally:
        handle.remove()


@pytest.mark.exercise(11)
def test_masks_leave_no_parameter_gradient():
    """Lesson 20. The attribution differentiates with respect to the attention maps only: after addrop_masks,
    before line 9's loss is backpropagated, every parameter's .grad is still None (a .backward() of F would fill
    them, and the optimizer would then step on F's gradient as well as the loss's), and every parameter still
    requires its gradient, as it came: the training step differentiates them next."""
    net, batch = tiny_model(), padded_batch()
    net.train()
    net.zero_grad(set_to_none=True)
    torch.manual_seed(0)
    masks = addrop.addrop_masks(net, batch, ALL, 0.5, 0.5)
    leaked = [name for name, w in net.named_parameters() if w.grad is not None]
    true(not leaked, f"after addrop_masks, before line 9's loss is backpropagated, {len(leaked)} parameters have a "
         f"gradient ({', '.join(leaked[:3])}, ...); expected none: the attribution may not touch .grad")
    frozen = [name for name, w in net.named_parameters() if not w.requires_grad]
    true(not frozen, f"after addrop_masks, {len(frozen)} parameters no longer require a gradient ({', '.join(frozen[:3])}"
         ", ...); expected every one as it came: the training step differentiates them next")
    one_entry_per_layer("addrop_masks on every layer", masks, ALL)


@pytest.mark.exercise(11)
@pytest.mark.parametrize("options", [{}, {"gold": True}, {"mask": "low"}, {"method": "aa"},
                                     {"method": "rd", "mask": "random"}, {"method": "iga", "m": 3},
                                     {"first_pass": "train"}, {"regression": True}, {"layers": [2, 0]}],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_masks_equal_the_real_ones(options):
    """Lesson 21. For the same seed, the masks are exactly the real ones, with each option that train.py's flags
    hand on (--attribution, --mask, --labels gold, --ig-steps, --first-pass, and a regression task's head,
    STS-B's), and with layers listed top first, their masks drawn in that order (the real ones in another order
    of the layers are named as such). p = 0.5, q = 0.5, the model in train mode, as in training."""
    options = dict(options)
    layers = options.pop("layers", [0, 2])
    regression = options.get("regression", False)
    net, batch = tiny_model(1 if regression else 3), padded_batch(regression=regression)
    said = f"addrop_masks with {', '.join(f'{k}={v!r}' for k, v in options.items()) or 'the default options'}" + \
        (f" on layers {layers}" if layers != [0, 2] else "")
    net.train()
    torch.manual_seed(0)
    masks = addrop.addrop_masks(net, batch, layers, 0.5, 0.5, **options)
    one_entry_per_layer(said, masks, layers)
    net.train()
    want = real_masks(net, batch, layers, 0.5, 0.5, **options)
    order_said(said, masks, want, layers, lambda order: real_masks(net.train(), batch, order, 0.5, 0.5, **options))
    for l in layers:
        diff = int((masks[l] != want[l]).sum()) if masks[l].shape == want[l].shape else want[l].numel()
        true(diff == 0, f"{said}: layer {l}'s mask differs from the real one in {diff} of {want[l].numel()} positions "
             "(same seed); expected the same: the option changes the real masks as the contract says, and each is "
             "handed on to the tool that reads it")

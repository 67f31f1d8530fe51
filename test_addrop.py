"""
Tests for addrop.py, written as a sequence of lessons: read them top to bottom to learn AD-DROP.

    1-5    attribution: what B_l = dF/dA_l is, and how it is computed (Eq. 2, 3, 5)
    6-9    the mask: sort, threshold, Bernoulli (Eq. 6-7), and what it does to attention (Eq. 1)
    10-14  the rest: cross-tuning, pseudo vs gold labels, regression, the ablations, --layers
    15-17  token-level tasks (NER, Appendix A): one attribution from many outputs, the pseudo loss

Everything runs in float64 on a tiny random model, micrograd-style, and is checked against
autograd, finite differences or a literal re-implementation of the paper's recipe.

    python -m pytest -q test_addrop.py                  # all lessons (a few seconds on a CPU)
    python -m pytest -q test_addrop.py -k completeness  # one lesson

As exercises: exercises/addrop.py is addrop.py with the core bodies blanked (exercises/make.py
writes it; README.md, section Exercises, gives their order and tolerances). Fill them in and run
the lessons on your file:

    python -m pytest test_addrop.py --impl exercises/addrop.py -x

--impl (conftest.py) imports the file as the module of its name before this file is imported,
so `import addrop` below gets yours (`--impl exercises/model.py` likewise swaps in your model).
A lesson that reaches a body not written yet fails with that exercise's message alone: its
number, its equation, and the command that runs only its lessons.
"""

import math

import pytest
import torch

import addrop
import model

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

# -----------------------------------------------------------------------------
# 1-5. attribution

def test_gradient_is_a_finite_difference():
    """Lesson 1. B_l = dF_c~/dA_l (Eq. 5) is the change of the pseudo-label logit when ONE attention
    probability moves, everything else held fixed. To move one entry we reuse Layer.forward's
    `scale`, which multiplies A elementwise: scale = 1 + eps/A at (b, h, i, j) and 1 elsewhere turns
    A into A + eps there (A > 0 on real keys). Central differences, eps = 1e-6: error ~1e-8 relative."""
    net, batch = tiny_model(), padded_batch()
    B_all = addrop.attribute(net, batch, ALL, "ga")
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
            fd, g = (F[0] - F[1]) / (2 * eps), B_all[l][b, h, i, j]
            assert abs(g) > 1e-3  # an entry that matters, so the comparison means something
            assert abs(fd - g) < 1e-7 * abs(g)


@pytest.mark.parametrize("training", [True, False])
def test_one_backward_equals_one_per_layer(training):
    """Lesson 2. All layers' B_l come from ONE backward: autograd.grad of the scalar F with respect to
    the list [A_l] is, entry by entry, what separate grad calls per layer give (the authors' loop).
    Attribution differentiates with respect to A only, so no parameter .grad is filled, and it runs
    in eval mode (no dropout noise) but hands the model back in the mode it came in."""
    net, batch = tiny_model(), padded_batch()
    logits, attns = run(net, batch)  # eval mode, as attribution runs
    F = logits.gather(1, logits.argmax(-1)[:, None]).sum()
    loop = [torch.autograd.grad(F, attns[l], retain_graph=True)[0] for l in ALL]
    net.train(training)
    B_all = addrop.attribute(net, batch, ALL, "ga")
    for l in ALL:
        assert (B_all[l] - loop[l]).abs().max() < 1e-12
    for method in ("ga", "iga", "aa"):
        addrop.attribute(net, batch, [0, 2], method, m=3)
        assert all(mod.training == training for mod in net.modules())
        assert all(p.grad is None for p in net.parameters())


def test_integrated_gradients_completeness():
    """Lesson 3. Integrated gradients (Eq. 3) is a right Riemann sum of the path integral
    F(A) - F(0) = int_0^1 A . dF(aA)/dA da, so for each example the sum of B_l over heads and
    positions tends to F(A) - F(0) (one layer scaled, the others as they are). The sum's error
    is about |g(1) - g(0)| / 2m: it shrinks roughly 4x each time m grows 4x."""
    net, batch = tiny_model(), padded_batch()
    l, c = 1, pseudo_labels(net, batch)
    with torch.no_grad():
        F1, F0 = (forward_scaled(net, batch, l, s)[0].gather(1, c[:, None]).squeeze(1) for s in (1.0, 0.0))
    errors = []
    for m in (1, 4, 16, 64):
        B_l = addrop.attribute(net, batch, [l], "iga", m=m)[l]
        errors.append((B_l.sum((1, 2, 3)) - (F1 - F0)).abs().max().item())
    assert all(later < earlier / 2 for earlier, later in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.02 * (F1 - F0).abs().max(), errors  # ~1/64 of the path's size


def test_one_step_integrated_gradient_is_attention_times_gradient():
    """Lesson 4. With m = 1 the Riemann sum has the single point a = 1, so Eq. 3 collapses to
    A_l * dF/dA_l at A_l itself: integrated gradients with one step is gradient x input."""
    net, batch = tiny_model(), padded_batch()
    attns = run(net, batch)[1]
    ga = addrop.attribute(net, batch, ALL, "ga")
    iga = addrop.attribute(net, batch, ALL, "iga", m=1)
    for l in ALL:
        assert (iga[l] - attns[l].detach() * ga[l]).abs().max() < 1e-12


def plain_integrated_gradients(net, batch, l, m):
    """Eq. 3 as the authors run it: m full forwards from the embeddings, layer l's attention
    scaled by k/m, one autograd call each."""
    c = pseudo_labels(net, batch)
    total = 0
    for k in range(1, m + 1):
        logits, A_scaled = forward_scaled(net, batch, l, k / m)
        total = total + torch.autograd.grad(logits.gather(1, c[:, None]).sum(), A_scaled)[0]
    return run(net, batch)[1][l].detach() * total / m


def test_batched_integrated_gradients_equal_the_plain_loop():
    """Lesson 5. addrop computes Eq. 3 faster without changing a number: the layers below l do not
    depend on the scale, so their output is computed once, and the m steps run as one batch of
    m*B copies (a large ig_budget), or one step per chunk (ig_budget = 1)."""
    net, batch = tiny_model(), padded_batch()
    plain = [plain_integrated_gradients(net, batch, l, m=8) for l in ALL]
    for ig_budget in (2**30, 1):
        fast = addrop.attribute(net, batch, ALL, "iga", m=8, ig_budget=ig_budget)
        for l in ALL:
            assert (fast[l] - plain[l]).abs().max() < 1e-10

# -----------------------------------------------------------------------------
# 6-9. the mask

def mask_of_row(row, attention_mask, p, q, low=False):
    """drop_mask on a batch of one example whose T query rows all carry the same score row;
    the rows of the real queries (T', T). Padding queries' rows must come back empty: their
    output reaches no real position, so masking them would change nothing."""
    T, real = len(row), torch.tensor(attention_mask).bool()
    scores = torch.tensor(row, dtype=torch.float64).expand(1, 1, T, T)  # (B=1, H=1, T, T)
    M = addrop.drop_mask(scores, torch.tensor([attention_mask]), p, q, low=low)[0, 0]  # (T, T)
    assert not M[~real].any()
    return M[real]


def dropped_keys(M):
    """The set of dropped key positions, the same in every row here."""
    rows = {tuple(torch.nonzero(r).flatten().tolist()) for r in M}
    assert len(rows) == 1
    return set(rows.pop())


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
    for p, candidates in [(0, set()), (0.25, {1}), (0.5, {1, 3}), (0.75, {0, 1, 3}), (1.0, set())]:
        assert dropped_keys(mask_of_row(row, real, p, q=1)) == candidates
        assert dropped_keys(mask_of_row(row, real, p, q=0)) == set()
    # the mirror strategy of Section 2.2 (low=True) takes the LOWEST scores; padding (-9.0) still never
    assert dropped_keys(mask_of_row(row, real, 0.5, q=1, low=True)) == {0, 2}
    # the float trap: 10 * (1 - 0.9) = 0.9999999999999998, whose int() is 0, which would make all ten
    # keys candidates; the intended index is 1: every key but the lowest (key 3) is dropped
    assert dropped_keys(mask_of_row([5, 2, 7, 0, 9, 4, 8, 1, 6, 3], [1] * 10, 0.9, q=1)) == set(range(10)) - {3}
    # ties at the threshold are all candidates ("at or above" b^[idx]): n = 6, p = 0.5, b^[3] = 2
    assert dropped_keys(mask_of_row([1, 2, 2, 2, 3, 0], [1] * 6, 0.5, q=1)) == {1, 2, 3, 4}


def test_threshold_index_is_exact_on_long_rows():
    """Lesson 6b. int(n(1-p)) must be exact for every real length, not only short ones: with
    n = 75 and p = 0.16, n(1-p) = 63, so exactly 75 - 63 = 12 distinct keys are candidates."""
    M = mask_of_row([float(j) for j in range(75)], [1] * 75, 0.16, q=1)
    assert dropped_keys(M) == set(range(63, 75))


def paper_mask(scores, attention_mask, p, q):
    """Eq. 6-7 taken literally, one row at a time: sort the row's real scores ascending (padding
    pushed to the end), threshold at b^[int(n(1-p))], drop a candidate where u ~ Bernoulli(1-q) is 0.
    Same three decisions as addrop: the int() is nudged by 1e-6 past float error, a row that
    would lose every real key keeps them all, and padding queries' rows are left alone.
    u is drawn as drop_mask draws it: one bernoulli((B, H, T, T), q)."""
    B, H, T, _ = scores.size()
    u = ~addrop.bernoulli((B, H, T, T), q)  # True: kept by the Bernoulli(1 - q) draw
    M = torch.zeros(B, H, T, T, dtype=torch.bool)
    for b in range(B):
        real = attention_mask[b].bool()
        n = int(real.sum())
        idx = int(n * (1 - p) + 1e-6)
        for h in range(H):
            for i in torch.nonzero(real).flatten().tolist():  # the real queries
                b_hat = torch.sort(scores[b, h, i].masked_fill(~real, INF)).values  # ascending
                # Eq. 6 sets s = 1 BELOW b^[idx]; Eq. 7 drops where s + u = 0: at or above it, and u = 0
                above = (scores[b, h, i] >= b_hat[idx]) & real if idx < n else torch.zeros(T, dtype=torch.bool)
                drop = above & ~u[b, h, i]
                if drop[real].all():
                    drop[:] = False
                M[b, h, i] = drop
    return M


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("q", [0, 0.1, 0.5, 1])
@pytest.mark.parametrize("p", [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1])
def test_fast_selection_equals_the_paper_recipe(p, q, ties):
    """Lesson 7. drop_mask finds the threshold with one selection (kthvalue) for the whole batch and
    never loops over rows; it must give the literal recipe's mask exactly, with the same random
    draws. Scores are continuous, or integers 0..3 so that ties at the threshold are common."""
    torch.manual_seed(0)
    scores = torch.randint(0, 4, (4, 3, 9, 9)).double() if ties else torch.randn(4, 3, 9, 9, dtype=torch.float64)
    attention_mask = (torch.arange(9) < torch.tensor([9, 7, 4, 2])[:, None]).long()
    torch.manual_seed(1)
    fast = addrop.drop_mask(scores, attention_mask, p, q)
    torch.manual_seed(1)
    assert torch.equal(fast, paper_mask(scores, attention_mask, p, q))


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
        assert abs((heads == k).sum().item() - N * pk) <= 5 * math.sqrt(N * pk * (1 - pk)) + 1
    for observed, pr in [(x.mean(0), prob), ((x[:, 1:] * x[:, :-1]).mean(0), prob**2)]:
        assert ((observed - pr).abs() <= 5 * math.sqrt(pr * (1 - pr) / N)).all()
    # exact ends, and a seeded generator repeats itself
    assert not addrop.bernoulli((50, 50), 0.0).any() and addrop.bernoulli((50, 50), 1.0).all()
    draw = [addrop.bernoulli((64, 64), prob, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    assert torch.equal(*draw)


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
    assert abs(dropped - q * N) < 5 * math.sqrt(N * q * (1 - q))
    # dropped_fraction divides two integer counts into a float32: equal to float32 precision
    assert abs(addrop.dropped_fraction([M], attention_mask).item() - dropped / (H * pairs.sum().item())) < 1e-6


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
    assert torch.isfinite(logits).all()
    for M, A in zip(masks, attns):
        assert not A.isnan().any()
        assert torch.all(A[M] == 0)
        assert (A.sum(-1) - 1).abs().max() < 1e-12
    if p == 1 and q == 1:
        assert not any(M.any() for M in masks)
        assert (logits - plain).abs().max() < 1e-12
    else:
        assert addrop.dropped_fraction(masks, batch["attention_mask"]) > 0.1

# -----------------------------------------------------------------------------
# 10-14. cross-tuning, labels, regression, ablations, --layers

def test_cross_tuning_schedule():
    """Lesson 10. Algorithm 1: odd epochs fine-tune plainly, even epochs run AD-DROP. Without
    cross-tuning (Table 2's ablation) every epoch runs AD-DROP."""
    assert [addrop.is_addrop_epoch(e) for e in range(1, 7)] == [False, True] * 3
    assert all(addrop.is_addrop_epoch(e, cross_tuning=False) for e in range(1, 7))


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
        assert torch.all(diff[~wrong] < 1e-12)
        assert torch.all(diff[wrong] > 1e-4)


def test_regression_attributes_the_negative_loss():
    """Lesson 12. A regression head (STS-B, one output) has no class to pick, so the attribution is
    -dL/dA with the gold score (Appendix A), L = 1/2 sum (y_hat - y)^2: positions whose attention
    lowers the loss score high."""
    net, batch = tiny_model(num_labels=1), padded_batch(regression=True)
    logits, attns = run(net, batch)
    loss = 0.5 * ((logits.squeeze(-1) - batch["labels"]) ** 2).sum()
    dA = torch.autograd.grad(loss, attns)
    B_all = addrop.attribute(net, batch, ALL, "ga", regression=True)
    for l in ALL:
        assert (B_all[l] + dA[l]).abs().max() < 1e-12


def test_attention_and_random_ablations():
    """Lesson 13. Table 2's ablations. AA scores each position by its attention probability itself,
    so it needs no label and no layer above the highest selected one: those are not run. RD needs no scores: its candidate region is a random p-fraction of each row, dropped with
    probability q, so each real key is dropped independently with probability p * q: the count
    is binomial, checked to 5 sigma; padding keys are never dropped."""
    net, batch = tiny_model(), padded_batch()
    attns = run(net, batch)[1]
    aa = addrop.attribute(net, batch, ALL, "aa")
    assert all(torch.equal(aa[l], attns[l].detach()) for l in ALL)
    ran = []  # AA of the first layer alone runs that layer only: nothing above it is read
    hooks = [layer.register_forward_hook(lambda *_, l=l: ran.append(l)) for l, layer in enumerate(net.encoder.layers)]
    first = addrop.attribute(net, batch, [0], "aa")
    for h in hooks:
        h.remove()
    assert ran == [0] and torch.equal(first[0], attns[0].detach())

    p, q, H = 0.5, 0.2, CFG["num_attention_heads"]
    torch.manual_seed(0)
    lengths = [int(k) for k in torch.randint(4, 17, (64,))]
    big = padded_batch(lengths)
    M = addrop.random_mask(big["attention_mask"], H, p, q)
    T = max(lengths)
    real = big["attention_mask"].bool()[:, None, None, :].expand(64, H, T, T)
    assert M.shape == (64, H, T, T) and not M[~real].any()  # padding is never dropped
    pairs = H * sum(k * k for k in lengths)  # real (query, key) pairs, each dropped with probability p q
    dropped = addrop.dropped_fraction([M], big["attention_mask"]).item() * pairs
    assert abs(dropped - p * q * pairs) < 5 * math.sqrt(pairs * p * q * (1 - p * q))


def test_parse_layers():
    """Lesson 14. --layers picks where AD-DROP masks: 'first' (the paper's choice on the large
    tasks), 'all' (the small ones), or explicit indices; a bad spec is refused by name."""
    assert addrop.parse_layers("first", 12) == [0]
    assert addrop.parse_layers("all", 3) == [0, 1, 2]
    assert addrop.parse_layers("0,2", 3) == [0, 2]
    with pytest.raises(ValueError, match="index 3 out of range .* 3 layers"):
        addrop.parse_layers("0,3", 3)
    with pytest.raises(ValueError, match="'last'.*expected 'first', 'all' or comma-separated"):
        addrop.parse_layers("last", 3)

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


def test_token_attribution_is_eq3_summed_token_by_token():
    """Lesson 15. A token task has a logit vector F_i per token, so no single F_c~ to differentiate.
    Appendix A fuses them through the pseudo loss L = -sum_i log P(c~_i | i) (Eq. 2): B = -dL/dA
    (Eq. 1). By the chain rule through the softmax, that is (Eq. 3)
        -dL/dA = sum_i sum_c (y_ic - P_ic) dF_ic/dA,   y_i the one-hot pseudo label,
    a weighted sum of every scored token's every logit gradient. Checked here against a loop of
    autograd calls, one per (token, class), to 1e-10 in float64. The paper's Eq. 3 keeps only the
    c = c~ term, (1 - P_c~) dF_c~/dA: that is a different matrix (here off by more than 1e-3), since
    the other logits move P_c~ too."""
    net, batch = tiny_token_model(), token_batch()
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
    for l in ALL:
        assert (B_all[l] - full[l]).abs().max() < 1e-10
    assert max((B_all[l] - paper[l]).abs().max() for l in ALL) > 1e-3


def test_ignored_positions_change_no_attribution():
    """Lesson 16. Positions labelled IGNORE ([CLS], [SEP], word continuations, padding) are not in the
    pseudo loss. With token (0, 3) ignored too, B equals -dL/dA for L summed over the remaining
    scored tokens only (1e-12), and differs from B with (0, 3) scored: the mark is all that counts.
    What the gold label of a scored token is never matters: B uses the pseudo labels, so other gold
    tags at the same positions give the same B bit for bit."""
    net, batch = tiny_token_model(), token_batch()
    ignored = dict(batch, labels=batch["labels"].clone())
    ignored["labels"][0, 3] = addrop.IGNORE
    B_ign = addrop.attribute(net, ignored, ALL, "ga")
    B_all = addrop.attribute(net, batch, ALL, "ga")
    logits, attns = run(net, batch)
    scored = (ignored["labels"] != addrop.IGNORE)
    c = logits.argmax(-1)
    L = -logits.log_softmax(-1).gather(-1, c[..., None]).squeeze(-1)[scored].sum()
    dA = torch.autograd.grad(L, attns)
    for l in ALL:
        assert (B_ign[l] + dA[l]).abs().max() < 1e-12
    assert max((B_ign[l] - B_all[l]).abs().max() for l in ALL) > 1e-6
    other_gold = dict(batch, labels=torch.where(batch["labels"] == addrop.IGNORE, addrop.IGNORE,
                                                (batch["labels"] + 1) % 3))
    B_other = addrop.attribute(net, other_gold, ALL, "ga")
    assert all(torch.equal(B_other[l], B_all[l]) for l in ALL)


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
            assert (iga[l] - attns[l].detach() * ga[l]).abs().max() < 1e-12
    masks = addrop.addrop_masks(net, batch, ALL, 0.5, 1.0, method)
    real = batch["attention_mask"].bool()
    for M in masks:
        assert M.shape == run(net, batch)[1][0].shape and M.any()
        assert not M[~(real[:, None, :, None] & real[:, None, None, :]).expand_as(M)].any()

# -----------------------------------------------------------------------------
# 18. the authors' first pass

@pytest.mark.parametrize("method", ["ga", "aa"])
def test_authors_first_pass_equals_ours_without_dropout(method):
    """Lesson 18. The authors' code runs the attribution pass in train mode, ordinary dropout on, and
    differentiates the attention map AFTER attention dropout (train.py --first-pass train); ours runs
    in eval mode on A itself. With every dropout rate 0 the two are the same function, so they give the
    same scores (1e-12). With dropout on, theirs is random: two draws differ, while ours repeats exactly
    (the candidate region changes from step to step in their code, and not in ours)."""
    torch.manual_seed(0)
    quiet = model.Model(model.Config(**CFG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), 3).double()
    quiet.load_state_dict(tiny_model().state_dict())
    batch = padded_batch()
    ours = addrop.attribute(quiet, batch, ALL, method)
    theirs = addrop.attribute(quiet.train(), batch, ALL, method, first_pass="train")
    assert quiet.training  # the mode it came in
    for l in ALL:
        assert (ours[l] - theirs[l]).abs().max() < 1e-12
    noisy = tiny_model()  # dropout 0.1
    a, b = (addrop.attribute(noisy, batch, ALL, method, first_pass="train") for _ in range(2))
    c, d = (addrop.attribute(noisy, batch, ALL, method) for _ in range(2))
    assert any((a[l] - b[l]).abs().max() > 1e-6 for l in ALL)
    assert all(torch.equal(c[l], d[l]) for l in ALL)
    assert not noisy.training

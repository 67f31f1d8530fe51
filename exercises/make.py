"""
The exercises: one file a function, exercises/NN_name.py, holding only that function's signature, its
contract (the shapes in and out, what it must return in the paper's terms, the behaviour the lessons check)
and a blank body; nothing of the real module and nothing that says how. The hints, revealed one at a time
by python exercises/hint.py N, say how, the last one the recipe. The real model.py and addrop.py keep their
full docstrings for readers of the core. Also writes RESULTS.md's exercise table. A lesson names the
exercises it checks by a marker, @pytest.mark.exercise(2, 3) (pytest.ini).

    python exercises/make.py           # writes the exercise files that are missing, and the table
    python exercises/make.py --force   # every exercise file blank again: answers dropped

An exercise file runs inside its module (impl.py): the student's function replaces the real one there, so
that the real code calls it, and it calls the real code (or the student's other exercises, in the capstone).
tests/test_exercises.py fails until the committed exercise files and the table are what this writes.
"""

import ast
import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "exercises"
TESTS = {"model.py": "test_model.py", "addrop.py": "test_addrop.py"}  # each module's lessons, beside it
TABLE = ("<!-- the exercise table: written by python exercises/make.py from the lessons' markers -->",
         "<!-- end of the exercise table -->")
AT_HAND = {"model.py": "torch, F (torch.nn.functional), math", "addrop.py": "torch, F (torch.nn.functional)"}


class Exercise(NamedTuple):
    number: int
    file: str         # model.py or addrop.py: the module whose function the student writes
    name: str         # the function
    equation: str     # what it implements, in the paper's terms
    contract: str     # what the student sees: shapes, what it returns, the behaviour the lessons check
    hints: tuple      # revealed one at a time; the last is the recipe
    optional: bool = False
    given: tuple = ()  # methods of the inputs (the model's pieces) that the contract states as their interface,
                       # as model.encoder.embed(...) -> ..., or functions of the exercise's module that it hands
                       # the student as tools, as addrop.layer_masks(...) -> ...: named although the answer calls them

    @property
    def path(self):
        """exercises/05_threshold.py: the student's file, relative to the repository."""
        return f"exercises/{self.number:02d}_{self.name.strip('_')}.py"


# In the order of the paper and the tutorial: attention (Eq. 1), the first pass and its pseudo labels (Eq. 4),
# the attribution (Eq. 5), the mask (Eq. 6-7), cross-tuning (Algorithm 1), the variants, then the step that
# ties them together. A contract says what, never how: it names no function that the answer calls.
EXERCISES = [
    Exercise(1, "model.py", "attention", "Eq. 1, self-attention with the padding mask and M_l", """\
Eq. 1, one layer's attention probabilities:

    A = softmax(q k^T / sqrt(D) + padding mask + M_l)       q = x W_q + b_q, and k, v likewise

layer    a Layer: layer.q, layer.k, layer.v are its projections, nn.Linear(C, C); layer.H is H, its heads
x        (B, T, C) the layer's input; the C channels are H heads of D = C / H channels, head h the
         channels h D to (h + 1) D - 1
pad      (B, 1, 1, T) the additive padding mask: 0 on real keys, -inf on padding keys
M        (B, H, T, T) bool, True where M_l = -inf (that query may not look at that key), or None
returns  (A, v): A (B, H, T, T), for each head and query a distribution over the keys;
         v (B, H, T, D), the values A weighs, in heads as q and k are

The lessons run the whole model on your A (its outputs must equal Hugging Face's BERT, RoBERTa and
ELECTRA to 1e-5: their outputs saved in reference/, and live too where transformers is installed), and check that padding changes no real token's output, that every row of A sums to 1
with nothing on padding keys, and that a mask with one True entry zeroes exactly that entry.""", (
        "Split the heads first: a (B, T, C) projection viewed as (B, T, H, D), then heads to the front, "
        "(B, H, T, D). The scores of every head and query are then one batched matrix product.",
        "Both masks are additive, -inf where a key is hidden: build one (B, H, T, T) tensor that is pad "
        "where M is False and -inf where M is True (masked_fill), add it to the scores, and take the "
        "softmax over the keys, the last dimension.",
        "B, T, C = x.size(); H, D = layer.H, C // layer.H\n"
        "q = layer.q(x).view(B, T, H, D).transpose(1, 2) / math.sqrt(D)   (k and v likewise, undivided)\n"
        "bias = pad if M is None else pad.masked_fill(M, float('-inf'))\n"
        "return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v\n"
        "(model.py folds 1/sqrt(D) into q's weights instead: fewer multiplications, equal to rounding.)")),
    Exercise(2, "addrop.py", "_unmasked_pass", "Eq. 4, the first pass and its pseudo labels", """\
Step 1 of AD-DROP: the first forward of the batch, no position dropped, and the labels whose
attribution is wanted: those given, or the pseudo labels of Eq. 4,

    c~ = argmax_c P_F(c | x)          (for each scored token, in a token task)

model      a Model: model(input_ids, attention_mask, token_type_ids, dropped_A=..., probes=...)
           -> (logits, [A_l (B, H, T, T)] * L), logits (B, K), or (B, T, K) for a token task
batch      a dict of (B, T) tensors: input_ids, attention_mask, token_type_ids, labels
labels     (B,), or (B, T) for a token task; None: the pseudo labels
dropped_A, probes   the model's keywords of those names, chosen by the caller, which this forward
           honours: dropped_A=True hands out each A_l after attention dropout; probes, None or a zero
           (B, H, T, T) per layer that the model adds to A_l, so that a caller may differentiate with
           respect to it instead of A_l (a compiled model allows only that; exercise 4, run eagerly, may
           differentiate with respect to A_l itself)
returns    (logits, labels, attns): this forward's logits and maps, and the labels to attribute

Where a token task does not score a token (batch["labels"] is IGNORE there: word continuations,
special tokens, padding), the token has no pseudo label either: IGNORE.
A regression head has no pseudo label: its gold scores come as `labels` (addrop.py's attribute hands
them on).

The lessons check that a label given is the label attributed, that with none the attribution is that
of the model's own prediction, that the model is handed dropped_A and probes, and the rule for
tokens.""", (
        "One forward of the model with no mask; what it returns, plus the labels, is what you return.",
        "Only when labels is None are they computed, from the logits you already have (Eq. 4). addrop.py "
        "has that as a function of its own, tokens and IGNORE included.",
        "logits, attns = model(batch['input_ids'], batch['attention_mask'], batch['token_type_ids'], "
        "dropped_A=dropped_A, probes=probes)\n"
        "if labels is None: labels = pseudo_labels(logits, batch)\n"
        "return logits, labels, attns")),
    Exercise(3, "addrop.py", "objective", "Eq. 5's F: the label's logit; -L for regression and tokens", """\
Eq. 5's F: the scalar whose gradient dF/dA_l is the attribution B_l.

logits, labels, regression   one of three kinds of head:
  classification   logits (B, K), labels (B,) the classes c~ to attribute
  regression       regression=True, logits (B, 1), labels (B,) gold scores y
  token task       logits (B, T, K), labels (B, T), IGNORE where a token is not scored
returns          F, a 0-dim tensor

What F is, in the paper's terms:
  classification   F_c~(A), the logit of class c~ before the softmax (Eq. 4-5)
  regression       no class to attribute (Appendix A): F = -L, L the squared error 1/2 (y^ - y)^2
                   (the training loss halved: a factor that changes no ranking of B)
  token task       F = -L, L the pseudo loss of Appendix A Eq. 2 (exercise 10)

One F serves a whole batch, whose examples do not interact: F's gradient with respect to example i's
attention must be example i's own dF/dA, exactly, whatever else the batch holds.

The lessons compare dF/dA with finite differences of the model's logits (to 1e-6), and the regression
case with the gradient of a regression head's loss.""", (
        "Three cases, told apart by the logits' shape and the regression flag; each is one line. Over the batch, "
        "each example counts once: a sum, whose gradient gives each example its own; a mean would divide "
        "every example's by B.",
        "Classification: pick each row's label column of the logits (gather, or index with arange) and sum. "
        "Regression: the squared error of the one output, halved, summed, negated. Tokens: minus exercise 10's "
        "loss, which addrop.py has as a function.",
        "if logits.dim() == 3: return -pseudo_loss(logits, labels)\n"
        "if regression: return -0.5 * ((logits.squeeze(-1) - labels) ** 2).sum()\n"
        "return logits.gather(1, labels[:, None]).sum()")),
    Exercise(4, "addrop.py", "gradient", "Eq. 5, GA: every selected layer's B_l from ONE backward", """\
Step 2 of AD-DROP, GA (Eq. 5): the attribution scores of each layer l in `layers`,

    B_l = dF / dA_l        (B, H, T, T)

F Eq. 5's scalar (exercise 3) of `labels` and `regression`, A_l layer l's attention probabilities in
this forward of the batch. Every selected layer's B_l comes from ONE backward pass.

model, batch   a Model and a dict of (B, T) tensors, as in exercise 2
layers         the layers to attribute (indices, 0 the lowest)
labels         None: the pseudo labels of this forward (Eq. 4, as exercise 2 settles them); else the
               labels to attribute (Table 2's gold labels, or a regression head's gold scores)
regression     a one-output head (exercise 3)
m, ig_budget   integrated gradients' (exercise 8); unused here
returns        {l: B_l} for each l in layers

Your caller, addrop.py's attribute (steps 1-2 for every method), sets the model's mode before the call
and restores it after: eval mode (ours: no dropout, so the pseudo label is the model's own prediction)
or train mode (the authors' first pass, train.py --first-pass train: dropout on). In train mode each
A_l is the map after attention dropout, the one the model hands out with dropped_A=True. It also
turns gradients on around the call (torch.enable_grad): a caller's torch.no_grad() stops nothing here.

Afterwards every parameter's .grad is as it was: B_l is a gradient with respect to the maps only.

The lessons check B_l against finite differences, one backward against one per layer, the gold labels
and a regression head's, the authors' first pass, and that no parameter's .grad is touched.""", (
        "The maps that your first pass hands out are tensors in the autograd graph. torch.autograd.grad "
        "differentiates one scalar with respect to a list of tensors at once (one backward) and touches no "
        ".grad field; a .backward() would fill every parameter's.",
        "Exercise 2's function gives the logits, the labels to attribute and the maps, with "
        "dropped_A=model.training (the map after attention dropout in train mode); exercise 3's gives F; "
        "then torch.autograd.grad(F, [attns[l] for l in layers]), a tuple in the order of layers.",
        "logits, labels, attns = _unmasked_pass(model, batch, labels, dropped_A=model.training)\n"
        "grads = torch.autograd.grad(objective(logits, labels, regression), [attns[l] for l in layers])\n"
        "return dict(zip(layers, grads))\n"
        "(addrop.py differentiates with respect to zero `probes` added to A instead, the parameters frozen: "
        "the same numbers, and a compiled model can be differentiated with respect to its inputs only.)")),
    Exercise(5, "addrop.py", "threshold", "Eq. 6, the threshold of each row", """\
Step 3 of AD-DROP, Eq. 6: the threshold of each row of scores, the cut at and above which a row's keys are
candidates. drop_mask calls it for a layer's mask, then draws Eq. 7's coins (each candidate dropped with
probability q) and keeps exercise 6's rules; a new mask may call it too.

scores   (..., T) rows of scores (a layer's attribution B_l is (B, H, T, T): a row per example, head and
         query)
real     bool, broadcastable to scores ((B, 1, 1, T) for a layer): True at a row's real keys, False at
         padding, which is neither counted in n nor ever a candidate
p        Eq. 6's candidate fraction, 0 <= p <= 1
returns  (..., 1) the threshold of each row: b^[int(n (1 - p))], b^ the row's n real scores in ascending
         order, counted from 0; +inf where the index is n, past the end (p = 0: no candidate)

Conventions the lessons compare against: int(n (1 - p)) is the integer that exact arithmetic gives, for
every n and every p given to 6 decimals (in floating point 10 * (1 - 0.9) is 0.99999..., whose int() is 0).
drop_mask makes every key at or above your threshold a candidate: keys that tie it are all candidates.

On a GPU and under torch.compile, code may read no number back to the CPU (no .item(), no int(tensor)).
A threshold written with a second path for that case must take the same decisions on both: the lessons run
both, forcing model.py's choice of path each way.

The lessons check it through drop_mask: rows worked by hand, p at 0 and at 1, long rows, every row of a
batch against Eq. 6 taken literally on both paths, the count of candidates, and the masked forward.""", (
        "n is each row's count of real keys (a sum over the last axis, keeping it). Padding must never be "
        "read as the threshold: give it a score that sorts last (+inf) before sorting each row. Keep the index "
        "in integers: round((1 - p) * 10**6), times n, floor-divided by 10**6.",
        "Sort each row; the threshold is one entry of it, read with gather at the row's index (clamped to T - 1, "
        "so that gather stays in range, then +inf where the index is n). The index has the shape of n, (..., 1) "
        "broadcast like real: expand it to the rows' shape before gathering.",
        "n = real.sum(-1, keepdim=True); keep = round((1 - p) * 10**6)\n"
        "if keep == 10**6: return +inf of shape scores[..., :1]             # p = 0\n"
        "idx = n * keep // 10**6                                           # int(n (1 - p)), (..., 1)\n"
        "b_hat = scores.masked_fill(~real, inf).sort(-1).values\n"
        "thr = b_hat.gather(-1, idx.clamp(max=T - 1).expand(*scores.shape[:-1], 1))\n"
        "return thr.masked_fill(idx == n, inf)\n"
        "(addrop.py's threshold selects b^[idx] with one kthvalue for all rows on an eager CPU instead of "
        "sorting each: the same numbers, 2.5x faster.)")),
    Exercise(6, "addrop.py", "_real_rows", "Eq. 6-7's edge cases: real pairs only, never a whole row", """\
What both masks (drop_mask, with exercise 5's threshold, and exercise 9's) do last: keep their drops to where dropping is allowed and safe.

drop             (B, H, T, T) bool, True where a position would be dropped (you may change it in place)
attention_mask   (B, T) 1 on real tokens, 0 on padding
returns          the mask, (B, H, T, T) bool: drop, changed only where these require it:

- only (real query, real key) pairs are ever dropped: a padding key has no attention to lose, and a
  padding query's output reaches no real token, so a drop there would drop nothing;
- no real query may be left with no real key to attend to: Eq. 1 would give it a row of -inf, NaN
  after the softmax. Such a query's attention comes out as the unmasked model's.

The lessons check both on rows worked by hand and on whole masks.""", (
        "Two (B, 1, T, 1) and (B, 1, 1, T) views of the real tokens, combined, say which pairs are real.",
        "A row has lost every real key when every position is dropped or padding: (drop | padding key).all "
        "over the keys, kept as (B, H, T, 1); such rows become all False.",
        "real = attention_mask.bool()\n"
        "drop = drop & real[:, None, :, None] & real[:, None, None, :]\n"
        "lost = (drop | ~real[:, None, None, :]).all(-1, keepdim=True)\n"
        "return drop & ~lost")),
    Exercise(7, "addrop.py", "is_addrop_epoch", "Algorithm 1, cross-tuning", """\
Algorithm 1, cross-tuning (Section 2.4): whether training epoch `epoch` runs AD-DROP (Algorithm 1's
lines 7-9) rather than the original fine-tuning (lines 3-5), a bool. Epochs count as Algorithm 1's do.

cross_tuning   True: Algorithm 1's schedule. False: Table 2's ablation "w/o cross-tuning" (Section 3.4).

The lessons check the first epochs of both schedules, and the epochs in which train.py's loop then
runs AD-DROP steps (train.py --no-cross-tuning for the ablation).""", (
        "Algorithm 1's line 4 is the whole decision: which epochs take the other branch? Section 2.4 says it "
        "in words, line 1 where the count starts; Section 3.4 says what the ablation runs instead.",
        "With cross-tuning, odd epochs fine-tune plainly and even epochs run AD-DROP (1, 3, 5, ... plain); "
        "without it, every epoch runs AD-DROP. The parity of the epoch decides.",
        "return epoch % 2 == 0 if cross_tuning else True")),
    Exercise(8, "addrop.py", "integrated_gradients", "Eq. 3, integrated gradients", """\
Eq. 3, integrated gradients (IGA): for each l in `layers`,

    B_l = A_l / m * sum_{k=1..m} dF(k/m A_l) / dA_l

F(k/m A_l) is F of the forward in which layer l's map is multiplied by k/m and every other layer runs
as usual: the point k/m A_l of integrated gradients' straight path from 0 to A_l, at which F's gradient
with respect to the map is taken: the gradient with respect to the scaled map itself, evaluated there (not
through the scaling, whose chain rule would add a factor k/m). F is Eq. 5's scalar (exercise 3) of
`labels` and `regression`; with labels None, of the pseudo labels (Eq. 4, as exercise 2 settles them)
of the unscaled forward, the same for every k.

model, batch   a Model and a dict of (B, T) tensors, as in exercise 2, the model in the mode its caller
               chose (eval: addrop.py's attribute refuses IGA with the authors' first pass)
layers, m      the layers to attribute (indices, 0 the lowest) and the number of steps
labels, regression   as in exercise 4: None (the pseudo labels) or the labels to attribute (a
               regression head's gold scores)
ig_budget      how many attention entries a faster version may hold at once; a plain loop may ignore it
returns        {l: B_l (B, H, T, T)}

Called under torch.no_grad() (as an evaluation loop or a notebook may call it), it gives the same B_l:
it turns gradients on where it takes them.

The model's pieces, which its own forward chains from the bottom up (L = len(model.encoder.layers)):
  model.encoder.embed(input_ids, attention_mask, token_type_ids) -> (x, pad)
        x (B, T, C) the embeddings, the lowest layer's input; pad (B, 1, 1, T) the additive
        padding mask that every layer takes
  model.encoder.layers[i](x, pad, scale=None) -> (y, A)
        layer i on its input x (B, T, C): its output y (B, T, C) and its attention map A (B, H, T, T);
        with scale a (B, 1, 1, 1) tensor, the layer runs with its map multiplied by scale and
        returns that scaled map
  model.head(y) -> logits
        the task's logits from the top layer's output

The lessons check completeness (sum of B_l near F(A) - F(0) as m grows), m = 1 against A times the
gradient, the real code's numbers to 1e-10, and a call under torch.no_grad().""", (
        "A plain loop is a correct answer: for each layer l and each k, run the model with layer l "
        "scaled by k/m, take dF/dA at the scaled map, and add it up. Only the layers from l up depend on "
        "the scale: the input x_l of layer l can be computed once, with no graph (torch.no_grad); the "
        "steps need one (torch.enable_grad), whoever called you.",
        "The unscaled pass (under torch.no_grad): x, pad = model.encoder.embed(ids, mask, types), then each "
        "layer in turn, keeping each input x_l and map A_l; pseudo labels from model.head(x) when labels is "
        "None (addrop.py's pseudo_labels(logits, batch), IGNORE kept). For each l and k, under "
        "torch.enable_grad: h, A_s = layers[l](x_l, pad, scale=k/m), the layers above, model.head(h), exercise "
        "3's F, torch.autograd.grad(F, A_s). A sentence head reads the first token only: the real code also "
        "passes first_only to the last layer (it changes no number).",
        "total = 0; for k in 1..m, with torch.enable_grad():\n"
        "    h, A_s = enc.layers[l](xs[l], pad, scale=torch.full((B, 1, 1, 1), k / m, dtype=x.dtype))\n"
        "    for i in range(l + 1, L): h, _ = enc.layers[i](h, pad)\n"
        "    g, = torch.autograd.grad(objective(model.head(h), labels, regression), A_s); total += g\n"
        "scores[l] = attns[l] * total / m\n"
        "(addrop.py runs the m steps as one batch of m B examples, in chunks of at most ig_budget "
        "entries: the same numbers, faster.)"), given=("embed", "head")),
    Exercise(9, "addrop.py", "random_mask", "Table 2's RD, the random baseline", """\
RD, Table 2's random baseline: Eq. 6's candidate region randomly generated instead of read from an
attribution (Section 3.4), each real position a candidate with probability p, independently of the
others; then Eq. 7: each candidate dropped with probability q. (The paper says only "randomly generating the discard
region"; this reading is the authors' code's.)

scores           (B, H, T, T), read for their shape only: RD has no attribution (addrop.py hands on equal
                 scores of a map's shape, so that every mask takes the same arguments)
attention_mask   (B, T) 1 on real tokens, 0 on padding
p, q             Eq. 6's candidate fraction and Eq. 7's drop rate
generator        the random stream (None: torch's default)
returns          M (B, H, T, T) bool, True where dropped, keeping exercise 6's rules

The coins are yours to draw: one independent coin per position, from `generator` when one is given
(generators seeded alike give the same mask, whatever torch's default stream holds).

The lessons check the rate of drops, that no example, head, query or key shares its coins with a
neighbour, where the coins come from, that the scores' values change nothing, and the edge cases.""", (
        "A position is dropped when it is a candidate (probability p) and its coin says drop (probability q), "
        "two independent events: what is the probability of both? One draw at that probability is the mask. "
        "The scores give its shape, nothing else.",
        "One field of coins at that probability: bernoulli((B, H, T, T), p * q, generator, attention_mask.device) "
        "(model.py's, as drop_mask's coins), then exercise 6's function, _real_rows, for the edge cases.",
        "B, H, T, _ = scores.size()\n"
        "return _real_rows(bernoulli((B, H, T, T), p * q, generator, attention_mask.device), attention_mask)")),
    Exercise(10, "addrop.py", "pseudo_loss", "Appendix A Eq. 2, the pseudo loss of token tasks", """\
Appendix A, Eq. 2: the pseudo loss of a token task. With token i's pseudo label c~_i written as a
one-hot vector y_i of the K classes,

    L = sum_i L_i = -sum_i sum_c y_{i,c} log P_F(c | x, i)

P_F(c | x, i) the softmax output of class c for token i; i runs over the scored tokens of the whole
batch.

logits   (B, T, K) each token's logits
labels   (B, T) each token's pseudo label c~_i; IGNORE (-100) marks a token that is not scored (a word
         continuation, a special token, padding): it has no label and is no term of L
returns  L, a 0-dim tensor

The lessons check L's gradient against Appendix A's Eq. 3 token by token, and that IGNORE tokens
move nothing.""", (
        "The one-hot y_i keeps one term of the inner sum: L_i = -log P_F(c~_i | x, i), token i's cross-entropy "
        "with its pseudo label. torch's cross-entropy takes (N, K) logits and (N,) labels, and can skip a "
        "label value.",
        "Flatten the first two dimensions; ignore_index=IGNORE; Eq. 2 is a sum over the tokens: "
        "reduction='sum' (the default mean would divide every token's gradient by their count).",
        "return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction='sum')")),
    Exercise(11, "addrop.py", "addrop_masks", "Algorithm 1, lines 7-8: the masks of one AD-DROP step", """\
Algorithm 1, lines 7-8, for one batch: "Perform AD-DROP by Eq. (4)-(7) to obtain mask matrices M": the
attribution of the selected layers (steps 1-2), then a mask M_l for each (step 3). Line 9, the forward
with the masks and its loss, is train.py's training step, which hands the model what this returns.

model, batch   a Model (in train mode, in training) and a dict of (B, T) tensors
layers         the layers to mask (indices, 0 the lowest), in the order their masks are drawn
p, q           Eq. 6's candidate fraction and Eq. 7's drop rate
method         the attribution, a key of addrop.ATTRIBUTIONS: "ga" (exercise 4), "iga" (exercise 8),
               "aa" (the maps themselves) or "rd" (none: equal scores, for the random mask)
mask           the mask, a key of addrop.MASKS: "high" (drop_mask, with exercise 5's threshold), "low" (its mirror) or
               "random" (exercise 9)
gold           True: the gold labels batch["labels"] are attributed instead of the pseudo labels (Table 2)
regression, m, first_pass   a regression head, IGA's steps, the first pass's mode ("eval" or "train")
returns        a list of L = model.cfg.num_hidden_layers entries: M_l (B, H, T, T) bool for each l in
               layers, None for every other layer

Your tools, from addrop.py:
  addrop.attribute(model, batch, layers, method, labels, regression, m, first_pass=...) -> {l: B_l}
        steps 1-2: the scores of each layer of `layers` (exercise 4's for "ga"; labels None: the pseudo
        labels); it runs its pass in eval mode unless first_pass="train", hands the model back in the
        mode it came in, and leaves no parameter gradient
  addrop.layer_masks(scores, attention_mask, p, q, mask) -> [M_l]
        step 3 for a list of scores, (B, H, T, T) each: a mask of each, drawn in the list's order

The lessons compare your masks with the real ones for the same seed, exactly, with each option (gold,
mask="low", the methods aa, rd and iga, first_pass="train", a regression head, layers [2, 0]); and check
that the first pass runs in eval mode, unmasked, that the model comes back in its mode with no parameter
gradient, that RD runs no forward at all, and the entry of each layer.""", (
        "Three pieces of work: the labels to attribute (gold or not), the scores of the selected layers, a "
        "mask from each layer's scores; then each mask goes to its layer's place in a list of one entry per "
        "layer. Every option is handed on to the tool that reads it.",
        "labels: batch['labels'] when gold, else None. attribute returns a dict; layer_masks takes a list, "
        "[scores[l] for l in layers], and returns the masks in that order: zip them with layers. The list "
        "starts as [None] * model.cfg.num_hidden_layers.",
        "scores = attribute(model, batch, layers, method, batch['labels'] if gold else None, regression, m, "
        "first_pass=first_pass)\n"
        "masks = [None] * model.cfg.num_hidden_layers\n"
        "for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch['attention_mask'], p, q, mask)):\n"
        "    masks[l] = M\n"
        "return masks"), given=("attribute", "layer_masks")),
]
BY_NUMBER = {e.number: e for e in EXERCISES}
BY_PATH = {Path(e.path).name: e for e in EXERCISES}


@functools.cache
def lessons(test_file):
    """[(test name, label, its marker's exercise numbers)] of test_file in file order, read from the source
    (tests/test_exercises.py checks that pytest reads the same); label: "6b" for a docstring "Lesson 6b. ...",
    else the name without test_."""
    out = []
    for node in ast.parse((ROOT / test_file).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marks = [d for d in node.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.exercise"]
            doc = re.match(r"Lesson (\w+)\.", ast.get_docstring(node) or "")
            numbers = tuple(ast.literal_eval(a) for m in marks for a in m.args)
            out.append((node.name, doc[1] if doc else node.name.removeprefix("test_"), numbers))
    return out


def checked_by(e, names=True):
    """e's lessons in words, "lessons 1, 2 and 11"; unnumbered ones by name, or with names=False by count."""
    labels = [label for _, label, numbers in lessons(TESTS[e.file]) if e.number in numbers]
    if not names and not all(len(label) <= 3 for label in labels):
        return f"{len(labels)} lessons marked exercise({e.number}) (pytest counts more: a lesson may run with several settings)"
    return "lesson " + labels[0] if len(labels) == 1 else f"lessons {', '.join(labels[:-1])} and {labels[-1]}"


def command(e):
    """The command that runs exercise e's lessons on the student's file, with the real code for the rest."""
    return f"python -m pytest {TESTS[e.file]} --impl {e.path}"


def command_all(folder="exercises"):
    """The command that runs every lesson on every exercise file of `folder`: all the answers at once."""
    return f"python -m pytest {' '.join(TESTS.values())} --impl {folder}"


def message(e):
    """What the blank body raises: first line for pytest's summary, then how to run its lessons."""
    return (f"Exercise {e.number} ({e.equation}): write {e.name} in {e.path}\n"
            f"  checked by {Path(TESTS[e.file]).name}'s {checked_by(e, names=False)}, with the real code for "
            f"everything else:\n  {command(e)}")


def find(tree, qualname):
    """The def node of 'name' or 'Class.name' at the top level of a module; LookupError('no NAME')."""
    nodes = tree.body
    for part in qualname.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise LookupError(f"no {qualname}")
        nodes = node.body
    return node


def body_lines(fn, lines):
    """The 0-based line range [start, end) of fn's body after its docstring, and its indent."""
    doc = fn.body[0]
    return doc.end_lineno, fn.end_lineno, " " * doc.col_offset


@functools.cache
def real_source(file):
    return (ROOT / file).read_text()


def signature(e):
    """The real def line(s) of e's function, up to its docstring."""
    fn, lines = find(ast.parse(real_source(e.file)), e.name), real_source(e.file).splitlines(keepends=True)
    return "".join(lines[fn.lineno - 1:fn.body[0].lineno - 1])


def real_body(e):
    """The real function's body after its docstring, as text."""
    fn, lines = find(ast.parse(real_source(e.file)), e.name), real_source(e.file).splitlines(keepends=True)
    start, end, _ = body_lines(fn, lines)
    return "".join(lines[start:end])


def contract(e):
    """What the student sees above the def: the exercise's docstring."""
    optional = " (optional)" if e.optional else ""
    return (f'"""\nExercise {e.number} of {len(EXERCISES)}{optional}: {e.name}, {e.equation}.\n\n{e.contract}\n\n'
            f"Write the body below. It runs inside {e.file}, so {AT_HAND[e.file]} and {e.file}'s\n"
            f"functions are at hand. Check it alone, with the real code for everything else:\n\n"
            f"    {command(e)}\n\nStuck? python exercises/hint.py {e.number} gives a hint, one more each time "
            f'({len(e.hints)} in all).\n"""\n\n\n')


def blank(e):
    """The text of e's exercise file, its body blank: the contract, the signature, the raise."""
    text = message(e)
    assert '"' not in text
    return (contract(e) + signature(e) + "    raise NotImplementedError(\n" +
            "".join('        "' + line + '"\n' for line in text.replace("\n", "\\n\n").split("\n")) + "    )\n")


def answered(e, text):
    """Whether `text`, a student's file of exercise e, has its body written (no longer the blank raise)."""
    return f'"Exercise {e.number} (' not in text


def table():
    """The exercise table of RESULTS.md, from EXERCISES and the lessons' markers."""
    rows = ["| # | write | in | equation | checked by (each lesson's docstring gives its tolerance) |",
            "|---|---|---|---|---|"]
    rows += [f"| {e.number} | `{e.file[:-3]}.{e.name}` | {e.path} | {e.equation} | "
             f"{TESTS[e.file]}: {checked_by(e).replace('_', ' ')} |" for e in EXERCISES]
    return "\n".join(rows)  # a lesson that checks no exercise (a researcher's new test) leaves it as it is


def with_table(text):
    """text, RESULTS.md, with what lies between its TABLE marker lines replaced by table()."""
    start, end = text.index(TABLE[0]) + len(TABLE[0]), text.index(TABLE[1])
    return text[:start] + "\n" + table() + "\n" + text[end:]


def refreshed(e, old):
    """old, a student's file of e, with the contract above its def written anew and its def and body kept;
    a body not answered yet is written anew too (its message names the lessons as they are now)."""
    start = old.find(f"def {e.name}(")
    return blank(e) if start < 0 or not answered(e, old) else contract(e) + old[start:]


if __name__ == "__main__":
    force = "--force" in sys.argv
    for e in EXERCISES:
        out = ROOT / e.path
        text = blank(e) if force or not out.exists() else refreshed(e, out.read_text())
        if not out.exists() or out.read_text() != text:
            out.write_text(text)
            print(f"wrote {e.path}" + ("" if force or not answered(e, text) else ", keeping your answer"))
    for stray in sorted(set(p.name for p in HERE.glob("[0-9]*.py")) - set(BY_PATH)):
        print(f"exercises/{stray} is no exercise now (its function changed): delete it, or keep your answer elsewhere")
    (ROOT / "RESULTS.md").write_text(with_table((ROOT / "RESULTS.md").read_text()))
    print("wrote the exercise table of RESULTS.md")

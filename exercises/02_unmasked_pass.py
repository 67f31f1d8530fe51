"""
Exercise 2 of 11: _unmasked_pass, Eq. 4, the first pass and its pseudo labels.

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
tokens.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/02_unmasked_pass.py

Stuck? python exercises/hint.py 2 gives a hint, one more each time (3 in all).
"""


def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    raise NotImplementedError(
        "Exercise 2 (Eq. 4, the first pass and its pseudo labels): write _unmasked_pass in exercises/02_unmasked_pass.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 11, 15, 16 and 18, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/02_unmasked_pass.py"
    )

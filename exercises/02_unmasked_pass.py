"""
Exercise 2 of 11: _unmasked_pass, Eq. 4, the first pass and its pseudo labels.

Step 1 of AD-DROP: the first, unmasked forward of the batch, and the labels whose attribution is wanted.

model      a Model: model(input_ids, attention_mask, token_type_ids, dropped_A=..., probes=...)
           returns (logits, [A_l (B, H, T, T)] * L)
batch      a dict of (B, T) tensors: input_ids, attention_mask, token_type_ids, labels
labels     the labels to attribute, (B,), or (B, T) for a token task; or None: then the pseudo labels
           c~ of Eq. 4, the class the model itself predicts for each example (each token, for a
           token task)
dropped_A, probes   for the model: they must reach it as given
returns    (logits, labels, attns): the model's outputs for the batch and the labels to attribute

A token task scores only some tokens: wherever batch["labels"] is IGNORE, the pseudo label is IGNORE.

The lessons check that a label given is the label used, that with none the attribution is that of the
model's own prediction, and, on a token model, that the pseudo labels are IGNORE where the batch's are.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/02_unmasked_pass.py

Stuck? python exercises/hint.py 2 gives a hint, one more each time (3 in all).
"""


def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    raise NotImplementedError(
        "Exercise 2 (Eq. 4, the first pass and its pseudo labels): write _unmasked_pass in exercises/02_unmasked_pass.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 11, 15, 16 and 18, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/02_unmasked_pass.py"
    )

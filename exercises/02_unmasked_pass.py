"""
Exercise 2 of 11: _unmasked_pass, Eq. 4, the first pass and its pseudo labels.

Step 1 of AD-DROP: the first, unmasked forward of the batch, and the labels to attribute.

model      a Model: model(input_ids, attention_mask, token_type_ids, dropped_A=..., probes=...)
           returns (logits, [A_l (B, H, T, T)] * L)
batch      a dict of (B, T) tensors: input_ids, attention_mask, token_type_ids, labels
labels     the labels to attribute, (B,), or (B, T) for a token task; None for the pseudo labels of
           Eq. 4: c~ = argmax over the classes of each example's logits (of each token's, for a
           token task, with IGNORE wherever batch["labels"] is IGNORE)
dropped_A, probes   handed to the model as they are
returns    (logits, labels, attns): the model's two outputs and the labels to attribute

The lessons check that a label given is the label used, and that the attribution is that of the
model's own prediction when none is given.

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

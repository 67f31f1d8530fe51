"""
Exercise 11 of 11: addrop_masks, Algorithm 1, lines 7-8: the masks of one AD-DROP step.

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
gradient, that RD runs no forward at all, and the entry of each layer.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/11_addrop_masks.py

Stuck? python exercises/hint.py 11 gives a hint, one more each time (3 in all).
"""


def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    raise NotImplementedError(
        "Exercise 11 (Algorithm 1, lines 7-8: the masks of one AD-DROP step): write addrop_masks in exercises/11_addrop_masks.py\n"
        "  checked by test_addrop.py's lessons 19, 20 and 21, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/11_addrop_masks.py"
    )

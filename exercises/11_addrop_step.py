"""
Exercise 11 of 11: addrop_step, Algorithm 1, lines 7-9: one AD-DROP step.

Algorithm 1, lines 7-9: one AD-DROP step on a batch, "Perform AD-DROP by Eq. (4)-(7) to obtain mask
matrices M. Calculate the new prediction and new loss by feeding M into Eq. (1)." Exercises 4, 5 and 9
are its pieces (RD, method "rd", needs no attribution); addrop.py's addrop_masks, which does Eq. 4-7 in
one call, refuses to run while the lessons run your step.

model, batch   a Model, in the mode training left it (train mode), and a dict of (B, T) tensors
layers         the layers to mask (indices, 0 the lowest); p, q as in exercise 5
loss           loss(logits, labels) -> the training loss, as a plain fine-tuning step takes it
forward        what runs the masked forward, called as the model is, with four positional arguments,
               the batch's (B, T) tensors and the masks, no keyword:
                 forward(input_ids, attention_mask, token_type_ids, masks) -> (logits, maps)
               None: the model itself, model(input_ids, attention_mask, token_type_ids, masks) -> (logits,
               maps). train.py passes its DDP wrapper of the same model (which doubles the batch for
               R-Drop): the attribution runs on `model`, never through it.
               masks: one entry per layer of the model, M_l (B, H, T, T) bool, or None for a layer
               left unmasked
method, gold, regression, m, low, first_pass
               the settings of Eq. 4-7, as train.py's flags give them: the attribution ("ga", "iga",
               "aa", or "rd"), gold (batch["labels"] attributed instead of the pseudo labels, Table 2's
               "r/w gold labels"), a regression head, IGA's steps, the mirror strategy, the first pass's
               mode. Each must take effect.
compile        None: each mask built eagerly, by its function (exercise 5's, or exercise 9's for "rd")
               called as it is. A backend name (train.py --compile; the lessons use "aot_eager"): each
               mask built by that function compiled as one graph, called in its place with the same
               arguments:
                 addrop.whole_graph(fn, compile) -> fn compiled whole (fullgraph=True) with that backend
               Under compile the coin flips are drawn as on a GPU, not as an eager CPU draws them: the
               masks differ from the eager ones for the same seed, and must equal the real step's.
returns        (the new loss, the masks the masked forward saw)

The convention the lessons compare against: the selected layers' masks are drawn in the order `layers`
lists them, so that for the same seed the random draws match the real step's.

The lessons check that the masked forward sees the masks, that the model comes back in the mode it
came in with no parameter gradient left by the attribution, and that the loss and masks equal the
real step's for the same seed, with each option, compile="aot_eager" among them.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/11_addrop_step.py

Stuck? python exercises/hint.py 11 gives a hint, one more each time (3 in all).
"""


def addrop_step(model, batch, layers, p, q, loss, forward=None, method="ga", gold=False, regression=False, m=20,
                low=False, first_pass="eval", compile=None):
    raise NotImplementedError(
        "Exercise 11 (Algorithm 1, lines 7-9: one AD-DROP step): write addrop_step in exercises/11_addrop_step.py\n"
        "  checked by test_addrop.py's lessons 19, 20, 21 and 21b, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/11_addrop_step.py"
    )

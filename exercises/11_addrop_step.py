"""
Exercise 11 of 11: addrop_step, Algorithm 1, lines 7-9: one AD-DROP step.

Algorithm 1, lines 7-9: one AD-DROP step on a batch, "Perform AD-DROP by Eq. (4)-(7) to obtain mask
matrices M. Calculate the new prediction and new loss by feeding M into Eq. (1)." Exercises 4, 5 and 9
are its pieces (RD, method "rd", needs no attribution); addrop.py's addrop_masks, which does Eq. 4-7 in
one call, refuses to run while the lessons run your step.

model, batch   a Model, in train mode, and a dict of (B, T) tensors
layers         the layers to mask (indices, 0 the lowest); p, q as in exercise 5
loss           loss(logits, labels) -> the training loss of a plain fine-tuning step
forward        what runs the masked forward (None: the model itself), called as the model is, with
               positional arguments only: forward(input_ids, attention_mask, token_type_ids, masks) ->
               (logits, maps), masks a list of one entry per layer of the model, M_l (B, H, T, T) bool or
               None for a layer left unmasked. The attribution runs on `model`, never through forward
               (train.py passes its DDP wrapper, which doubles the batch for R-Drop).
method, gold, regression, m, low, first_pass
               train.py's flags of those names: the attribution ("ga", "iga", "aa", or "rd"), the gold
               labels attributed instead of the pseudo labels (Table 2), a regression head, IGA's steps,
               the mirror strategy, the first pass's mode. Each must take effect.
compile        None, or a torch.compile backend (train.py --compile) through which each mask function fn
               runs: addrop.whole_graph(fn, compile) -> fn compiled whole (fn itself when compile is None).
               It must take effect too: a compiled graph draws its coins otherwise than eager code
returns        (the new loss, the masks the masked forward saw)

The lessons compare the loss and the masks with the real step's for the same seed, with every option,
compile="aot_eager" among them; the selected layers' masks are drawn in the order `layers` lists them.
They also check that the masked forward sees the masks, and that the model comes back in the mode it came
in with no parameter gradient left by the attribution.

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

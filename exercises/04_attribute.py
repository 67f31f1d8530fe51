"""
Exercise 4 of 11: attribute, Eq. 5, all selected layers from ONE backward.

Steps 1-2 of AD-DROP: the attribution scores B_l (B, H, T, T) of each layer l in `layers`, as a dict
{l: B_l}.

model, batch   a Model and a dict of (B, T) tensors, as in exercise 2
method   "ga": Eq. 5, B_l = dF/dA_l, F Eq. 5's scalar (exercise 3) of the labels that exercise 2 settles, A_l
               layer l's attention probabilities; every selected layer's from ONE backward pass
         "iga": Eq. 3's integrated gradients with m steps (exercise 8, whose ig_budget this is)
         "aa": Table 2's AA: the attention probabilities A_l themselves; no layer above the highest
               selected one runs
         anything else: ValueError
labels   None (pseudo labels) or the gold labels. regression=True: a regression head, which has no
         pseudo label: its attribution is of the actual loss, on the batch's gold scores (Appendix A)
first_pass   the mode of the attribution's forward: "eval" (no dropout: the pseudo label is the
         model's actual prediction) or "train" (the authors' code: dropout on, each map taken after
         attention dropout). A map with dropout's zeros on it is no point of integrated gradients'
         path from 0 to A_l: "train" with "iga" is a ValueError.

The model's encoder, its forward below the head:
  model.encoder(input_ids, attention_mask, token_type_ids, depth=d, ...) -> (hidden, [A_l] for the layers run)
        runs the lowest d layers only (depth=None: all of them) and returns their output hidden
        (B, T, C) (the first token's alone, (B, 1, C), with first_only=True) and the maps A_l
        (B, H, T, T) of the d layers run, the lowest first; its other keywords are the model's
        (dropped_A=True: each map taken after attention dropout)

Afterwards, returned or raised, the model is in the mode it came in, and every parameter's .grad is as
it was. Called under torch.no_grad() (as an evaluation loop may call it), it gives the same B_l. The lessons check B_l against finite differences, one backward against one per layer, and each
behaviour above.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/04_attribute.py

Stuck? python exercises/hint.py 4 gives a hint, one more each time (3 in all).
"""


def attribute(model, batch, layers, method="ga", labels=None, regression=False, m=20, ig_budget=None,
              first_pass="eval"):
    raise NotImplementedError(
        "Exercise 4 (Eq. 5, all selected layers from ONE backward): write attribute in exercises/04_attribute.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 4, 11, 12, 13, 18 and 18b, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/04_attribute.py"
    )

"""
Exercise 4 of 11: attribute, Eq. 5, all selected layers from ONE backward.

Steps 1-2 of AD-DROP: the attribution scores B_l (B, H, T, T) of each layer l in `layers`, as a dict
{l: B_l}, with B_l = dF/dA_l (Eq. 5), F Eq. 5's scalar (exercise 3) of the labels (exercise 2: the
pseudo labels when labels is None), A_l layer l's attention probabilities.

model, batch   a Model and a dict of (B, T) tensors, as in exercise 2
method   "ga": the gradient, Eq. 5, every selected layer's from ONE backward pass;
         "iga": integrated gradients with m steps, Eq. 3 (exercise 8; hand ig_budget on to it);
         "aa": the attention maps A_l themselves (Table 2), from a forward that runs no layer above
               the highest selected one (the model's encoder takes depth=d to run its lowest d layers)
         anything else: ValueError
labels   None (pseudo labels) or the gold labels; with regression=True always batch["labels"]
first_pass   "eval": the attribution runs with the model in eval mode (no dropout: the pseudo label is
         the model's actual prediction); "train" (the authors' code): in train mode, and the maps taken
         after attention dropout (the model hands those out when called with dropped_A=True). "train"
         is for "ga" and "aa" only: with "iga" it raises ValueError.

The model's encoder, its forward below the head:
  model.encoder(input_ids, attention_mask, token_type_ids, depth=d, ...) -> (hidden, [A_l] for the layers run)
        runs the lowest d layers only (depth=None: all of them) and returns their output hidden
        (B, T, C) (the first token's alone, (B, 1, C), with first_only=True) and the maps A_l
        (B, H, T, T) of the d layers run, the lowest first; its other keywords are the model's
        (dropped_A=True: each map taken after attention dropout)

Whatever happens, also when it raises, the model goes back to the mode it came in, and no parameter
gradient is computed or left behind (the .grad fields stay as they were). The lessons check B_l against
finite differences, one backward against one per layer, and each of these behaviours.

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

"""
Exercise 4 of 11: gradient, Eq. 5, GA: every selected layer's B_l from ONE backward.

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
and a regression head's, the authors' first pass, and that no parameter's .grad is touched.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/04_gradient.py

Stuck? python exercises/hint.py 4 gives a hint, one more each time (3 in all).
"""


def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    raise NotImplementedError(
        "Exercise 4 (Eq. 5, GA: every selected layer's B_l from ONE backward): write gradient in exercises/04_gradient.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 4, 11, 12 and 18, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/04_gradient.py"
    )

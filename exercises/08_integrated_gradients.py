"""
Exercise 8 of 11: integrated_gradients, Eq. 3, integrated gradients.

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
gradient, the real code's numbers to 1e-10, and a call under torch.no_grad().

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/08_integrated_gradients.py

Stuck? python exercises/hint.py 8 gives a hint, one more each time (3 in all).
"""


def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    raise NotImplementedError(
        "Exercise 8 (Eq. 3, integrated gradients): write integrated_gradients in exercises/08_integrated_gradients.py\n"
        "  checked by test_addrop.py's lessons 2, 3, 4, 5, 11 and 17, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/08_integrated_gradients.py"
    )

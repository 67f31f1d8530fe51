"""
Exercise 1 of 11: attention, Eq. 1, self-attention with the padding mask and M_l.

Eq. 1, one layer's attention probabilities:

    A = softmax(q k^T / sqrt(D) + padding mask + M_l)       q = x W_q + b_q, and k, v likewise

layer    a Layer: layer.q, layer.k, layer.v are its projections, nn.Linear(C, C); layer.H is H, its heads
x        (B, T, C) the layer's input; the C channels are H heads of D = C / H channels, head h the
         channels h D to (h + 1) D - 1
pad      (B, 1, 1, T) the additive padding mask: 0 on real keys, -inf on padding keys
M        (B, H, T, T) bool, True where M_l = -inf (that query may not look at that key), or None
returns  (A, v): A (B, H, T, T), for each head and query a distribution over the keys;
         v (B, H, T, D), the values A weighs, in heads as q and k are

The lessons run the whole model on your A (its outputs must equal Hugging Face's BERT, RoBERTa and
ELECTRA to 1e-5: their outputs saved in reference/, and live too where transformers is installed), and check that padding changes no real token's output, that every row of A sums to 1
with nothing on padding keys, and that a mask with one True entry zeroes exactly that entry.

Write the body below. It runs inside model.py, so torch, F (torch.nn.functional), math and model.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_model.py --impl exercises/01_attention.py

Stuck? python exercises/hint.py 1 gives a hint, one more each time (3 in all).
"""


def attention(layer, x, pad, M=None):
    raise NotImplementedError(
        "Exercise 1 (Eq. 1, self-attention with the padding mask and M_l): write attention in exercises/01_attention.py\n"
        "  checked by test_model.py's 14 lessons marked exercise(1) (pytest counts more: a lesson may run with several settings), with the real code for everything else:\n"
        "  python -m pytest test_model.py --impl exercises/01_attention.py"
    )

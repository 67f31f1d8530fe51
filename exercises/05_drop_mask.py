"""
Exercise 5 of 11: drop_mask, Eq. 6-7, the mask.

Step 3 of AD-DROP, for one layer: the mask M_l of Eq. 6-7.

scores           (B, H, T, T) the attribution B_l
attention_mask   (B, T) 1 on real tokens, 0 on padding
p, q             the candidate fraction and the drop probability of a candidate
low              True: the mirror strategy of Section 2.2, the LOWEST scores are the candidates
generator        the random stream of the coin flips (None: torch's default)
returns          M (B, H, T, T) bool, True where M_l = -inf: the position is dropped

Eq. 6, per row (example, head, query): with n the example's real length and b^ the row's n real scores
in ascending order, the candidates are the real keys scoring at or above b^[int(n (1 - p))], about the
top p of the row. Eq. 7: each candidate is dropped with probability q. The coin flips are one per
position of the mask, drawn from `generator` as model.py's dropout draws its own: the lessons compare
your mask with the recipe's for the same draws.

Behaviour the lessons check: padding keys are never candidates and padding queries lose nothing;
p = 0 or q = 0 drops nothing, p = 1 makes every real key a candidate, q = 1 drops every candidate;
int(n (1 - p)) is exact for every n, p given to 6 decimals (at p = 0.9 and n = 10 it is 1, though
10 (1 - 0.9) is just below 1 in floating point); ties at the threshold are all candidates; a row that
would lose every real key keeps them all; the mask equals the literal recipe's, row by row.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/05_drop_mask.py

Stuck? python exercises/hint.py 5 gives a hint, one more each time (3 in all).
"""


def drop_mask(scores, attention_mask, p, q, low=False, generator=None):
    raise NotImplementedError(
        "Exercise 5 (Eq. 6-7, the mask): write drop_mask in exercises/05_drop_mask.py\n"
        "  checked by test_addrop.py's lessons 6, 6b, 7, 8 and 9, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/05_drop_mask.py"
    )
